package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/dedup"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// at is a message without an event ID at topic t, partition 0, offset 5:
// a record written at ts with value v under leader epoch epoch.
func at(ts time.Time, epoch int32, v string) *consumer.Message {
	return &consumer.Message{Record: &kgo.Record{Topic: "t", Partition: 0, Offset: 5, LeaderEpoch: epoch,
		Timestamp: ts, Value: []byte(v), ProducerID: -1}, Attempt: 1}
}

// testReusedOffset: records without an event ID at one reused offset (a
// topic deleted and created again, a truncated log): a done mark of the
// old record never skips a different new one. By default both are refused
// (ErrNoEventID, permanent: dead-lettered) and the handler does not run;
// RunWithoutDedup runs every delivery; KeyByPosition runs both and skips a
// redelivery of either.
func testReusedOffset(t *testing.T, s dedup.Store) {
	ctx := ctxFor(t, 30*time.Second)
	ts := time.Now().Truncate(time.Millisecond)
	old, recreated := at(ts, 0, "old"), at(ts.Add(time.Hour), 0, "new")
	truncated, sameBytes := at(ts, 1, "old"), at(ts, 0, "other value")

	newHandler := func(policy dedup.NoEventIDPolicy) (*dedup.Dedup, consumer.Handler, map[string]int) {
		d, err := dedup.New(dedup.Config{Store: s, Group: unique(t), NoEventID: policy})
		if err != nil {
			t.Fatal(err)
		}
		effects := map[string]int{}
		return d, d.Middleware(consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
			effects[fmt.Sprintf("%s@e%d", m.Record.Value, m.Record.LeaderEpoch)]++
			return nil
		})), effects
	}
	deliver := func(h consumer.Handler, ms ...*consumer.Message) []error {
		var errs []error
		for _, m := range ms {
			errs = append(errs, h.Handle(ctx, m))
		}
		return errs
	}

	t.Run("Refuse", func(t *testing.T) {
		d, h, effects := newHandler(dedup.RefuseNoEventID)
		for i, err := range deliver(h, old, recreated) {
			if !errors.Is(err, dedup.ErrNoEventID) || !consumer.IsPermanent(err) {
				t.Fatalf("delivery %d: error %v, want a permanent error wrapping ErrNoEventID", i+1, err)
			}
			if want := "topic t partition 0 offset 5"; !strings.Contains(err.Error(), want) {
				t.Fatalf("delivery %d: error %q does not name the record (%q)", i+1, err, want)
			}
		}
		if len(effects) != 0 {
			t.Fatalf("effects %v: the handler ran on a refused message", effects)
		}
		if st := d.Stats(); st.Refused != 2 || st.Ran+st.Skipped != 0 {
			t.Fatalf("stats %+v: want 2 refused", st)
		}
	})
	t.Run("RunWithoutDedup", func(t *testing.T) {
		d, h, effects := newHandler(dedup.RunWithoutDedup)
		if err := errors.Join(deliver(h, old, recreated, old)...); err != nil {
			t.Fatal(err)
		}
		if effects["old@e0"] != 2 || effects["new@e0"] != 1 {
			t.Fatalf("effects %v: want every delivery run (old twice, new once)", effects)
		}
		if st := d.Stats(); st.RanWithoutDedup != 3 || st.Ran+st.Skipped != 0 {
			t.Fatalf("stats %+v: want 3 ran without dedup", st)
		}
	})
	t.Run("KeyByPosition", func(t *testing.T) {
		d, h, effects := newHandler(dedup.KeyByPosition)
		if err := errors.Join(deliver(h, old, recreated, truncated, sameBytes, old, recreated, truncated, sameBytes)...); err != nil {
			t.Fatal(err)
		}
		want := map[string]int{"old@e0": 1, "new@e0": 1, "old@e1": 1, "other value@e0": 1}
		if fmt.Sprint(effects) != fmt.Sprint(want) {
			t.Fatalf("effects %v, want %v: each record once, its redelivery skipped", effects, want)
		}
		if st := d.Stats(); st.Ran != 4 || st.Skipped != 4 || st.KeyedByPosition != 8 {
			t.Fatalf("stats %+v: want 4 ran, 4 skipped, 8 keyed by position", st)
		}
	})
}

// deliveries counts the deliveries a consumer finished (the handler
// succeeded or the message was skipped), and the effects applied, by
// record value.
type deliveries struct {
	mu      sync.Mutex
	n       int
	effects map[string]int
	changed chan struct{}
}

func newDeliveries() *deliveries {
	return &deliveries{effects: map[string]int{}, changed: make(chan struct{})}
}

// middleware counts every delivery that ended well, outside dedup.
func (c *deliveries) middleware(h consumer.Handler) consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		err := h.Handle(ctx, m)
		if err == nil {
			c.mu.Lock()
			c.n++
			close(c.changed)
			c.changed = make(chan struct{})
			c.mu.Unlock()
		}
		return err
	})
}

func (c *deliveries) handler() consumer.Handler {
	return consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.effects[string(m.Record.Value)]++
		return nil
	})
}

// waitFor waits until n deliveries ended well.
func (c *deliveries) waitFor(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		got, changed := c.n, c.changed
		c.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%d of %d deliveries: %w", got, n, ctx.Err())
		}
	}
}

// testRecreatedTopic: records without event IDs, keyed by position, on a
// topic deleted and created again: the new topic's records reuse the old
// ones' offsets, and they run (each once) although the old ones are done;
// a redelivery of the new ones (the group's offsets rewound) is skipped.
func testRecreatedTopic(t *testing.T, s dedup.Store) {
	const n = 6
	r := newRig(t, s)
	ctx := ctxFor(t, 2*time.Minute)
	c := newDeliveries()
	d, err := dedup.New(dedup.Config{Store: s, Group: r.group, WaitInterval: 20 * time.Millisecond, NoEventID: dedup.KeyByPosition})
	if err != nil {
		t.Fatal(err)
	}
	produce := func(round int) {
		t.Helper()
		cl, err := r.b.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for i := range n { // no lanes-event-id header
			rec := &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "round %d #%d", round, i)}
			if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	consume := func(group string, want int) {
		t.Helper()
		cons, err := consumer.New(consumer.Config{Brokers: r.b.Addrs(), Group: group, Topics: []string{topic},
			DeadLetterTopic: dlq, CommitInterval: 50 * time.Millisecond,
			Retry:      consumer.RetryPolicy{InitialInterval: 2 * time.Millisecond, MaxInterval: 20 * time.Millisecond, MaxAttempts: 1000},
			Middleware: []consumer.Middleware{c.middleware, d.Middleware},
		}, c.handler())
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- cons.Run(runCtx) }()
		err = c.waitFor(ctx, want)
		stop()
		if rerr := <-done; rerr != nil && !errors.Is(rerr, context.Canceled) {
			t.Logf("consumer of group %s: %v", group, rerr)
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	produce(1)
	consume(r.group+"-first", n)
	if err := r.b.DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	if err := r.b.CreateTopics(ctx, partitions, topic); err != nil {
		t.Fatal(err)
	}
	produce(2) // offsets 0..5 of partition 0 again
	second := r.group + "-second"
	consume(second, 2*n)
	commitAt(t, r.b, second, 0)
	consume(second, 3*n)

	c.mu.Lock()
	defer c.mu.Unlock()
	for round := 1; round <= 2; round++ {
		for i := range n {
			if v := fmt.Sprintf("round %d #%d", round, i); c.effects[v] != 1 {
				t.Errorf("%s: effect applied %d times, want once", v, c.effects[v])
			}
		}
	}
	if st := d.Stats(); st.Ran != 2*n || st.Skipped != n || st.KeyedByPosition != 3*n {
		t.Fatalf("stats %+v: want %d ran, the %d redelivered skipped", st, 2*n, n)
	}
}

// commitAt commits offset at for partition 0 of the topic in group.
func commitAt(t *testing.T, b *lanestest.Broker, group string, at int64) {
	t.Helper()
	cl, err := b.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
	resp, err := kadm.NewClient(cl).CommitOffsets(ctxFor(t, 30*time.Second), group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("rewind group %s: %v", group, err)
	}
}
