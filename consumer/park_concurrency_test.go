package consumer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lanesdev/lanes/consumer/internal/parkwire"
)

// TestParkRetrySessionKeyNotConcurrent: Config.SessionKey runs one call at
// a time (Consumer.userMu: records are admitted on the poll loop and from a
// stash on the flow goroutine). A parked head's retry computes its
// session again with SessionKey on its lane's worker: many sessions retried
// at once call it concurrently with each other and with admissions, and
// -race reports the user's plain state.
func TestParkRetrySessionKeyNotConcurrent(t *testing.T) {
	const per = 3
	e := newEnv(t, 2, "chats", "chats.park", "dlq")
	sessions := sessionNames(24)
	e.produce("chats", sessions, per)
	var once sync.Map
	rec := newRecorder(len(sessions)*per, func(ctx context.Context, m *Message) error {
		if s, seq := parseValue(m.Record.Value); seq == 0 {
			if _, again := once.LoadOrStore(s, true); !again {
				return Park(errors.New("down"))
			}
		}
		return nil
	})
	keyed := map[string]int{} // plain state, as a user's SessionKey may keep
	cfg := e.config("g-park-sessionkey", "chats")
	cfg.Park = ParkPolicy{Enabled: true, Delay: 10 * time.Millisecond}
	cfg.SessionKey = func(r *kgo.Record) string {
		keyed[string(r.Key)]++
		return string(r.Key)
	}
	runAll(t, cfg, rec, 0)
	checkOrder(t, rec, []string{"chats"}, sessions, per)
}

// TestParkOutDoneUnderClaim: the stall skipper dead-letters a record when
// it gets its claim (TryLock) and finds it not done. parkOut holds the
// claim across the park write, but released it before its caller marked
// the source record done (finish): in between, a skip wrote a DLQ copy of
// a record that is also parked, to be retried and handled later. When
// parkOut lets go of the claim, its record must be done.
func TestParkOutDoneUnderClaim(t *testing.T) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	cfg := e.config("g-park-claim", "chats")
	cfg.Park.Enabled = true
	c, err := New(cfg, HandlerFunc(func(context.Context, *Message) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.openPark(); err != nil {
		t.Fatal(err)
	}
	defer c.closePark()
	p := newPartition(context.Background(), partKey{"chats", 0}, 1, 100, func(*partition) {})
	p.enablePark(c.cfg.Park.rules(), c.cfg.Group, 1, "classic")
	r := &kgo.Record{Topic: "chats", Partition: 0, Offset: 0, Key: []byte("s"), Value: []byte("s|0")}
	var seq uint64
	p.admit([]*kgo.Record{r}, 1, nil, func(_ int, s uint64) { seq = s })
	if !p.start(seq) {
		t.Fatal("record did not start")
	}
	w := &work{rec: r, p: p, seq: seq, session: "s", lane: "s"}
	now := time.Now()
	if !c.parkOut(w, errors.New("down"), 1, now, now, "") {
		t.Fatal("parkOut failed")
	}
	if !w.claim.TryLock() {
		t.Fatal("claim still held after parkOut")
	}
	defer w.claim.Unlock()
	if !p.isDone(seq) {
		t.Fatal("record parked but not done when its claim was released: the stall skipper would dead-letter it too")
	}
	p.finish(seq, true)
}

// TestParkRetriesWaitForOpenBreaker: parking and the breaker combine
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md): the
// breaker holds every lane while most attempts fail, and a failure while it
// is open is excused. A parked head's retry asks no breaker: during an
// outage that opened it, a parked session spends its whole park budget and
// its head is dead-lettered (park-exhausted), while every record in the
// source partitions waits.
func TestParkRetriesWaitForOpenBreaker(t *testing.T) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	const stuck = "chat-stuck"
	others := sessionNames(12)
	var outage, parkedOnce atomic.Bool
	outage.Store(true)
	all := append([]string{stuck}, others...)
	rec := newRecorder(len(all)*2, func(ctx context.Context, m *Message) error {
		s, seq := parseValue(m.Record.Value)
		if s == stuck && seq == 0 && parkedOnce.CompareAndSwap(false, true) {
			return Park(errors.New("its own dependency is down"))
		}
		if outage.Load() {
			return errors.New("shared dependency down")
		}
		return nil
	})
	cfg := e.config("g-park-breaker", "chats")
	cfg.Retry.Forever = true
	cfg.Park = ParkPolicy{Enabled: true, Delay: time.Second, MaxDelay: time.Second, MaxAttempts: 2,
		AfterAttempts: 1000, After: time.Hour, OnExhausted: ParkRelease}
	cfg.Breaker = BreakerPolicy{Enabled: true, MinCalls: 4, ProbeInterval: 100 * time.Millisecond}
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	produceSeqs(t, e, "chats", stuck, 0, 2)
	eventually(t, "the stuck session parked", func() bool {
		st := c.Stats()
		return len(st.Partitions) == 1 && st.Partitions[0].Park.Records == 2
	})
	produceAll(t, e, others, 0, 2) // they fail: the breaker opens
	eventually(t, "the breaker open for 40 probes", func() bool { return c.Stats().Breaker.Probes >= 40 })
	outage.Store(false)
	eventually(t, "every message done, nothing parked", func() bool {
		st := c.Stats()
		return st.Processed+st.DeadLettered >= int64(len(all)*2) && len(st.Partitions) == 1 && st.Partitions[0].Park.Sessions == 0
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := c.Stats().DeadLetteredByReason[ReasonParkExhausted]; n != 0 {
		t.Fatalf("%d parked records dead-lettered (park-exhausted) while the breaker was open: their retries ran and failed as if the breaker were closed", n)
	}
	checkOrder(t, rec, []string{"chats"}, all, 2)
}

// TestParkUnavailableRecovers: a partition whose parked set could not be
// rebuilt (here: the park topic created only after the consumer started)
// is held "until it is assigned again". Under cooperative-sticky (and
// KIP-848) a member keeps its partitions across rebalances, and with one
// member there is no rebalance at all: the partition is held for the life
// of the process although the park topic is now fine. It must recover
// once the cause is gone (a later rebuild), not only on a new assignment.
func TestParkUnavailableRecovers(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	sessions := sessionNames(3)
	e.produce("chats", sessions, 2)
	rec := newRecorder(len(sessions)*2, nil)
	_, stop := startHeldWithoutParkTopic(t, e, "g-park-late-topic", rec)
	if _, err := kadm.NewClient(e.client()).CreateTopic(context.Background(), 1, 1, nil, "chats.park"); err != nil {
		t.Fatal(err)
	}
	rec.wait(t) // times out: the partition stays held
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, rec, []string{"chats"}, sessions, 2)
}

// TestParkRebuiltRecordKeepsSource: a parked record retried after a
// restart is rebuilt from its park copy; the handler must see it as it saw
// it before the restart (a parked head handled but not marked done runs
// again, and a handler or dedup.PositionKey keyed on the record's
// timestamp, leader epoch or producer must recognise it). The copy carries
// none of them: the rebuilt record has the copy's write time as its
// timestamp and no producer ID or leader epoch.
func TestParkRebuiltRecordKeepsSource(t *testing.T) {
	io := newParkIO(&Config{Park: ParkPolicy{TopicSuffix: DefaultParkTopicSuffix}})
	src := &kgo.Record{Topic: "chats", Partition: 2, Offset: 41, Key: []byte("s"), Value: []byte("v"),
		Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), LeaderEpoch: 7, ProducerID: 9001, ProducerEpoch: 3}
	now := time.Now()
	cp := io.w.Copy(src, "s", 5, 1, now, now, "down")
	cp.Offset, cp.Timestamp = 12, now // as the broker stores it: the copy's own write time
	_, got, err := parkwire.Parse(cp)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Timestamp.Equal(src.Timestamp) || got.LeaderEpoch != src.LeaderEpoch || got.ProducerID != src.ProducerID ||
		got.ProducerEpoch != src.ProducerEpoch {
		t.Fatalf("rebuilt record: timestamp %v, leader epoch %d, producer %d.%d; the source had %v, %d, %d.%d",
			got.Timestamp, got.LeaderEpoch, got.ProducerID, got.ProducerEpoch,
			src.Timestamp, src.LeaderEpoch, src.ProducerID, src.ProducerEpoch)
	}
}

// TestParkRetriedRebuildDrains: a rebuild retried by the park loop counts
// as running work of its partition while it runs, so that a revoke's
// drain waits for it: its fence, of the generation the member is in then,
// lands before the partition can go to a new owner of that generation
// (whose fence, later, is then the one in force), never after.
func TestParkRetriedRebuildDrains(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	sessions := sessionNames(2)
	e.produce("chats", sessions, 1)
	rec := newRecorder(len(sessions), nil)
	c, stop := startHeldWithoutParkTopic(t, e, "g-park-retry-drains", rec)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	// The retried rebuild's fence write waits until the test releases it.
	names := e.topicNames()
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		for _, rt := range kreq.(*kmsg.ProduceRequest).Topics {
			// chats.park is made after names were read: the one topic
			// written whose ID they lack.
			if rt.Topic == "chats.park" || rt.Topic == "" && names[rt.TopicID] == "" {
				once.Do(func() { close(held) })
				e.sleep(release) // an injected slow write, not a synchronisation
			}
		}
		return nil, nil, false
	})
	if _, err := kadm.NewClient(e.client()).CreateTopic(context.Background(), 1, 1, nil, "chats.park"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(testTimeout):
		t.Fatal("the retried rebuild wrote no fence")
	}
	p := c.own.all()[0]
	p.mu.Lock()
	running := p.running
	p.mu.Unlock()
	close(release)
	if running < 1 {
		t.Fatalf("partition running %d while its retried rebuild writes its fence; want it counted (a revoke's drain waits for it)", running)
	}
	rec.wait(t)
}

// startHeldWithoutParkTopic starts a consumer of group with parking on
// over chats, whose park topic does not exist yet, and waits until its
// partition is held for it (the park loop then retries the rebuild).
func startHeldWithoutParkTopic(t *testing.T, e *env, group string, h Handler) (*Consumer, func() error) {
	t.Helper()
	cfg := e.config(group, "chats")
	cfg.Park.Enabled = true
	cfg.CommitTimeout = 500 * time.Millisecond // the missing topic is looked for 1s
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	eventually(t, "partition held: no park topic", func() bool {
		st := c.Stats()
		return len(st.Partitions) == 1 && st.Partitions[0].Park.Error != ""
	})
	return c, stop
}
