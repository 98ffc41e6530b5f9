package producer

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/hashring"
	"github.com/lanesdev/lanes/tracing"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Result is what the broker acknowledged for one message.
type Result struct {
	Partition int32
	Offset    int64
	// EventID is the message's lanes-event-id: the one given with
	// WithEventID or WithSequence, or a new UUIDv7.
	EventID string
}

// Producer sends session-keyed messages. It is safe for concurrent use.
//
// Messages of one session go to one partition (the session ID is the record
// key) and keep the order in which Send or SendAsync was called for them,
// also across retries: franz-go's idempotent producer never reorders or
// duplicates records of a partition. Callers that send one session from
// several goroutines must order those calls themselves.
type Producer struct {
	cfg Config
	cl  *kgo.Client

	mu       sync.RWMutex // held for reading by sends, for writing by Close
	closed   bool
	inflight sync.WaitGroup // accepted sends whose callback has not run

	sent, failed atomic.Int64
	tracer       *tracing.Tracer
	metrics      *metrics
	sendLog      logLimiter // failed sends, by topic and kind
}

// New validates cfg and connects lazily (the first send dials the brokers).
func New(cfg Config) (*Producer, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.RecordPartitioner(partitioner(cfg.Partitioning)),
		kgo.RecordDeliveryTimeout(cfg.DeliveryTimeout),
		kgo.ProducerLinger(cfg.Linger),
		// Before ClientOptions: a kgo.WithLogger there replaces it.
		kgo.WithLogger(&kgoLogger{log: cfg.Logger}),
	}
	if cfg.MaxMessageBytes > 1_000_000 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(cfg.MaxMessageBytes+batchOverhead)))
	}
	cl, err := kgo.NewClient(append(opts, cfg.ClientOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("producer: start client: %w", err)
	}
	m, err := newMetrics(cfg)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("producer: metrics: %w", err)
	}
	return &Producer{cfg: cfg, cl: cl, tracer: tracing.New(cfg.TracerProvider, cfg.Propagator), metrics: m}, nil
}

// batchOverhead is room for the record batch framing and lanes' headers
// above the largest value.
const batchOverhead = 4096

// partitioner is the producer's partitioner for p: the scheme's own,
// stamping each keyed record with its placement (hashring.Partitioner).
func partitioner(p Partitioning) kgo.Partitioner {
	if p == PartitionJump {
		return hashring.Partitioner(hashring.SchemeJump)
	}
	return hashring.Partitioner(hashring.SchemeKafka)
}

// Send sends one message of session and waits for the broker's ack (or ctx).
// If ctx ends first, Send returns ctx's error with the message's event ID
// in its Result: the message may still be delivered (resend it under that
// ID, WithEventID, for consumers to deduplicate).
func (p *Producer) Send(ctx context.Context, sessionID string, value []byte, opts ...SendOption) (Result, error) {
	type outcome struct {
		res Result
		err error
	}
	ch := make(chan outcome, 1)
	id := p.sendAsync(ctx, sessionID, value, func(r Result, err error) { ch <- outcome{r, err} }, opts)
	select {
	case o := <-ch:
		return o.res, o.err
	case <-ctx.Done():
		return Result{EventID: id}, fmt.Errorf("producer: send %s (event %s): %w", sessionID, id, ctx.Err())
	}
}

// SendAsync sends one message of session and calls done exactly once with
// the result, from a franz-go goroutine (done must not block for long).
// done may be nil. Messages for one session sent by one goroutine are
// written in call order. Bad input calls done at once with a typed error.
// A ctx ended already fails the message at once; otherwise ctx bounds
// only the wait for room in the client's buffer (SendAsync blocks while it
// is full). Once SendAsync returns, the message is the producer's:
// delivered, or failed by DeliveryTimeout, whatever becomes of ctx (a
// caller's ending context would otherwise fail the other messages
// buffered for its partition, other sessions' among them; one ending in
// the instant its message is buffered still can).
func (p *Producer) SendAsync(ctx context.Context, sessionID string, value []byte, done func(Result, error), opts ...SendOption) {
	p.sendAsync(ctx, sessionID, value, done, opts)
}

// sendAsync is SendAsync; it returns the message's event ID ("" for bad
// input).
func (p *Producer) sendAsync(ctx context.Context, sessionID string, value []byte, done func(Result, error), opts []SendOption) string {
	if done == nil {
		done = func(Result, error) {}
	}
	rec, err := p.record(sessionID, value, opts)
	if err != nil {
		p.failed.Add(1)
		done(Result{}, err)
		return ""
	}
	id := eventid.FromRecord(rec)
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		p.failed.Add(1)
		done(Result{EventID: id}, ErrClosed)
		return id
	}
	if err := ctx.Err(); err != nil { // ended already: not buffered, so it fails no other message
		p.failed.Add(1)
		done(Result{EventID: id}, fmt.Errorf("producer: send %s (event %s): %w", sessionID, id, err))
		return id
	}
	p.inflight.Add(1)
	start := time.Now()
	_, span := p.tracer.StartSend(ctx, rec, sessionID, id)
	rctx, stop := recordCtx(ctx)
	p.cl.Produce(rctx, rec, func(r *kgo.Record, err error) {
		defer p.inflight.Done()
		tracing.EndSend(span, r, err)
		p.metrics.sendDone(time.Since(start), err)
		res := Result{Partition: r.Partition, Offset: r.Offset, EventID: id}
		if err != nil {
			p.failed.Add(1)
			err = classify(rec.Topic, err)
			p.logSendFailed(err, rec.Topic, sessionID, id)
			done(Result{EventID: id}, err)
			return
		}
		p.sent.Add(1)
		done(res, nil)
	})
	stop() // buffered (or failed): ctx no longer reaches it
	return id
}

// recordCtx is the context a message is produced under: ctx's values,
// and its end only until stop is called, once Produce returned (the
// message buffered, or failed). So ctx may end Produce's wait for room in
// a full buffer (failing this message alone, not yet buffered), but not
// the message once buffered: franz-go fails every record buffered for a
// partition when the first one's context has ended, so a caller's ended
// request would fail other sessions' messages, out of their order. A ctx
// ending in the instant between the buffering and stop can still do so.
func recordCtx(ctx context.Context) (context.Context, func()) {
	if ctx.Done() == nil { // never ends (context.Background): nothing to cut off
		return ctx, func() {}
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	return rctx, func() { stop() }
}

// record validates the input and builds the record with lanes' headers.
func (p *Producer) record(sessionID string, value []byte, opts []SendOption) (*kgo.Record, error) {
	if sessionID == "" {
		return nil, ErrEmptySession
	}
	if value == nil && !p.cfg.AllowNilValues {
		return nil, ErrNilValue
	}
	if n := len(value) + len(sessionID); n > p.cfg.MaxMessageBytes {
		return nil, fmt.Errorf("%w: %d bytes, MaxMessageBytes is %d", ErrTooLarge, n, p.cfg.MaxMessageBytes)
	}
	var o sendOpts
	for _, opt := range opts {
		opt(&o)
	}
	if o.topicSet && o.topic == "" {
		return nil, fmt.Errorf("%w: WithTopic(\"\")", ErrNoTopic)
	}
	topic := cmp.Or(o.topic, p.cfg.Topic)
	if topic == "" {
		return nil, ErrNoTopic
	}
	id, err := o.resolveEventID(sessionID)
	if err != nil {
		return nil, err
	}
	rec := &kgo.Record{Topic: topic, Key: []byte(sessionID), Value: value, Headers: o.headers}
	eventid.Stamp(rec, id, sessionID)
	return rec, nil
}

// Flush waits until every message sent so far is acknowledged or failed,
// or ctx ends.
func (p *Producer) Flush(ctx context.Context) error {
	if err := p.cl.Flush(ctx); err != nil {
		return fmt.Errorf("producer: flush: %w", err)
	}
	return nil
}

// Close stops accepting messages, waits up to CloseTimeout for buffered ones
// to be delivered, fails the rest with ErrClosed, and releases the client.
// Every callback of an accepted message runs exactly once before Close
// returns. Close is idempotent.
func (p *Producer) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.CloseTimeout)
	defer cancel()
	_ = p.cl.Flush(ctx)
	p.cl.Close()
	p.inflight.Wait()
}

// Stats is a snapshot of the producer's counters.
type Stats struct {
	// Sent counts messages acknowledged by the broker.
	Sent int64
	// Failed counts messages that failed (bad input, delivery errors,
	// closed producer).
	Failed int64
	// Buffered is the number of messages accepted but not yet acknowledged.
	Buffered int64
}

// Stats returns the producer's counters.
func (p *Producer) Stats() Stats {
	return Stats{Sent: p.sent.Load(), Failed: p.failed.Load(), Buffered: p.cl.BufferedProduceRecords()}
}
