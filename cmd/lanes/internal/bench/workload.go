package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/lanesdev/lanes/hashring"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// workload is one benchmark case: what is sent and what the handler does.
type workload struct {
	Name     string  `json:"name"`
	Mode     string  `json:"mode"` // "closed": a preloaded backlog; "open": a fixed send rate
	Sessions int     `json:"sessions"`
	Zipf     float64 `json:"zipf_s"` // 0: uniform keys; > 1: Zipf with this exponent
	// Work is the handler's simulated work per attempt.
	Work      time.Duration `json:"work_ns"`
	Transient float64       `json:"transient"` // probability that an attempt fails (retried)
	RetryWait time.Duration `json:"retry_wait_ns"`
	Messages  int           `json:"messages"` // closed mode: the backlog; open mode: rate × duration
	Rate      int           `json:"rate"`     // open mode: messages per second
	Duration  time.Duration `json:"duration_ns"`
	// Partitions of the workload's topic.
	Partitions int `json:"partitions"`
}

// retry schedule shared by every consumer: the first wait is RetryWait,
// each further one doubles, capped; no jitter, so the bound is exact.
const (
	retryMultiplier = 2
	retryMaxFactor  = 64
)

// wait returns the wait after the k-th failed attempt of a message (k ≥ 1).
func (w workload) wait(k int) time.Duration {
	d := w.RetryWait
	for i := 1; i < k && d < w.RetryWait*retryMaxFactor; i++ {
		d *= retryMultiplier
	}
	return min(d, w.RetryWait*retryMaxFactor)
}

// fails decides, the same way for every consumer, whether an attempt of a
// message fails transiently.
func (w workload) fails(session, seq uint32, attempt int) bool {
	if w.Transient <= 0 {
		return false
	}
	x := uint64(session)<<40 ^ uint64(seq)<<8 ^ uint64(attempt)
	// splitmix64
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11)/(1<<53) < w.Transient
}

// cost is the least time a message keeps its session busy: every attempt's
// work and the waits between attempts.
func (w workload) cost(session, seq uint32) time.Duration {
	var d time.Duration
	for a := 1; ; a++ {
		d += w.Work
		if !w.fails(session, seq, a) {
			return d
		}
		d += w.wait(a)
	}
}

// sessionPicker returns the session of each successive message: round
// robin for uniform keys, seeded Zipf draws otherwise.
func (w workload) sessionPicker() func(i int) uint32 {
	if w.Zipf == 0 {
		return func(i int) uint32 { return uint32(i % w.Sessions) }
	}
	z := rand.NewZipf(rand.New(rand.NewPCG(12, 1)), w.Zipf, 1, uint64(w.Sessions-1))
	return func(int) uint32 { return uint32(z.Uint64()) }
}

// plan is the sequence of (session, seq) a workload sends, and its bound.
type plan struct {
	session []uint32
	seq     []uint32
	perSess []int
	// bound is messages ÷ the busiest session's total cost: no consumer that
	// keeps per-session order can beat it. +Inf when the work is zero.
	bound float64
}

func (w workload) plan() plan {
	p := plan{session: make([]uint32, w.Messages), seq: make([]uint32, w.Messages), perSess: make([]int, w.Sessions)}
	pick := w.sessionPicker()
	busy := make([]time.Duration, w.Sessions)
	for i := range w.Messages {
		s := pick(i)
		p.session[i], p.seq[i] = s, uint32(p.perSess[s])
		p.perSess[s]++
		busy[s] += w.cost(s, p.seq[i])
	}
	var most time.Duration
	for _, b := range busy {
		most = max(most, b)
	}
	p.bound = math.Inf(1)
	if most > 0 {
		p.bound = float64(w.Messages) / most.Seconds()
	}
	return p
}

// A record's value: session, seq in the session, index in the run, and the
// intended send time (Unix ns; 0 in closed mode). primeSession marks the
// records that open mode sends first to see that a consumer is ready.
const (
	valueLen     = 20
	primeSession = math.MaxUint32
)

func encodeValue(b []byte, session, seq, idx uint32, intended int64) []byte {
	b = binary.BigEndian.AppendUint32(b, session)
	b = binary.BigEndian.AppendUint32(b, seq)
	b = binary.BigEndian.AppendUint32(b, idx)
	return binary.BigEndian.AppendUint64(b, uint64(intended))
}

func decodeValue(v []byte) (session, seq, idx uint32, intended int64, ok bool) {
	if len(v) != valueLen {
		return 0, 0, 0, 0, false
	}
	return binary.BigEndian.Uint32(v), binary.BigEndian.Uint32(v[4:]), binary.BigEndian.Uint32(v[8:]),
		int64(binary.BigEndian.Uint64(v[12:])), true
}

func benchKey(session uint32) []byte { return fmt.Appendf(nil, "s-%06d", session) }

// sender produces a workload's records with Apache Kafka's key partitioning
// (computed here, so priming records can go to chosen partitions).
type sender struct {
	cl   *kgo.Client
	w    workload
	p    plan
	keys [][]byte
	part []int32
}

func newSender(broker *lanestest.Broker, w workload, p plan) (*sender, error) {
	cl, err := broker.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Millisecond), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		return nil, fmt.Errorf("producer client: %w", err)
	}
	s := &sender{cl: cl, w: w, p: p, keys: make([][]byte, w.Sessions), part: make([]int32, w.Sessions)}
	for i := range s.keys {
		s.keys[i] = benchKey(uint32(i))
		n, err := hashring.KafkaPartition(s.keys[i], w.Partitions)
		if err != nil {
			cl.Close()
			return nil, err
		}
		s.part[i] = int32(n)
	}
	return s, nil
}

func (s *sender) close() { s.cl.Close() }

func (s *sender) record(topic string, i int, intended int64) *kgo.Record {
	sess := s.p.session[i]
	return &kgo.Record{Topic: topic, Key: s.keys[sess], Partition: s.part[sess],
		Value: encodeValue(make([]byte, 0, valueLen), sess, s.p.seq[i], uint32(i), intended)}
}

// preload sends the whole plan as fast as the broker takes it.
func (s *sender) preload(ctx context.Context, topic string) error {
	const batch = 20_000
	recs := make([]*kgo.Record, 0, batch)
	for i := range s.w.Messages {
		recs = append(recs, s.record(topic, i, 0))
		if len(recs) == batch || i == s.w.Messages-1 {
			if err := s.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				return fmt.Errorf("preload %s: %w", topic, err)
			}
			recs = recs[:0]
		}
	}
	return nil
}

// prime sends one marker record to every partition.
func (s *sender) prime(ctx context.Context, topic string) error {
	recs := make([]*kgo.Record, s.w.Partitions)
	for p := range recs {
		recs[p] = &kgo.Record{Topic: topic, Partition: int32(p),
			Value: encodeValue(make([]byte, 0, valueLen), primeSession, 0, 0, 0)}
	}
	if err := s.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("prime %s: %w", topic, err)
	}
	return nil
}

// paced sends the plan at the workload's rate. Each record carries its
// intended send time, start + i/rate: if sending or the broker falls
// behind, the delay counts in the latency (no coordinated omission).
func (s *sender) paced(ctx context.Context, topic string, start time.Time, failed func(error)) {
	interval := float64(time.Second) / float64(s.w.Rate)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			failed(err)
		}
	}
	for i := 0; i < s.w.Messages; {
		due := min(s.w.Messages, int(float64(time.Since(start))/interval)+1)
		for ; i < due; i++ {
			intended := start.Add(time.Duration(float64(i) * interval)).UnixNano()
			s.cl.Produce(ctx, s.record(topic, i, intended), done)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
