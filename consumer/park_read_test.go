package consumer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lanesdev/lanes/consumer/internal/parkset"

	"github.com/lanesdev/lanes/consumer/internal/parkwire"
)

// TestParkedRecordReadBack: the parked set keeps offsets, not records; a
// retry reads its head back. The handler must see at the retry exactly
// what it saw at the first attempt (topic, partition, offset, key, value,
// headers, timestamp, event ID), also when the copy was removed from the
// park topic (read from the source partition then). With both gone its
// loss is dead-lettered (reason park-lost, its provenance) and the session
// goes on; the partition's other sessions flow meanwhile.
func TestParkedRecordReadBack(t *testing.T) {
	for _, tc := range []struct {
		name   string
		delete []string // topics whose records are deleted through the parked one
		retry  bool     // whether the retry can run
	}{
		{"from the park topic", nil, true},
		{"copy gone, from the source", []string{"chats.park"}, true},
		{"both gone", []string{"chats.park", "chats"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1, "chats", "chats.park", "dlq")
			gone := kafkaOutOfRange(t, e)
			const stuck = "chat-stuck"
			ts := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
			first := &kgo.Record{Topic: "chats", Key: []byte(stuck), Value: []byte(stuck + "|0"), Timestamp: ts,
				Headers: []kgo.RecordHeader{{Key: "lanes-event-id", Value: []byte("ev-1")}, {Key: "tenant", Value: []byte("t9")}}}
			if err := e.client().ProduceSync(context.Background(), first).FirstErr(); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var seen []string // what the stuck session's calls saw
			parked := make(chan struct{})
			done := 1 // the other session's message, and the stuck one's when its retry can run
			if tc.retry {
				done++
			}
			rec := newRecorder(done, func(_ context.Context, m *Message) error {
				if m.SessionID != stuck {
					return nil
				}
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, describe(m))
				if len(seen) == 1 {
					close(parked)
					return Park(errors.New("its backend is down"))
				}
				return nil
			})
			c, stop := startDueByHand(t, e, "g-park-read", rec, nil)
			<-parked
			eventually(t, "the record parked", func() bool { return parkedRecords(c) == 1 })
			for _, topic := range tc.delete {
				gone(topic, deleteThrough(t, e, topic))
			}
			produceSeqs(t, e, "chats", "chat-other", 0, 1) // the partition flows meanwhile
			makeDue(t, c, stuck)
			if !tc.retry {
				dl := readDLQ(t, e, 1)[0]
				finishUnparked(t, c, rec, stop) // rec: the other session
				if headerOf(dl, HeaderDLQReason) != string(ReasonParkLost) || headerOf(dl, HeaderDLQTopic) != "chats" ||
					headerOf(dl, HeaderDLQOffset) != "0" || headerOf(dl, parkwire.HeaderSession) != stuck || len(dl.Value) != 0 {
					t.Fatalf("dead-lettered %q with %v; want its loss (reason park-lost, chats offset 0, its session)", dl.Value, dl.Headers)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(seen) != 1 {
					t.Fatalf("the stuck session's handler ran %d times; want once (its record lost before the retry)", len(seen))
				}
				return
			}
			finishUnparked(t, c, rec, stop)
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 2 || seen[0] != seen[1] {
				t.Fatalf("the retry saw\n%s\nthe first attempt\n%s", seen[len(seen)-1], seen[0])
			}
		})
	}
}

// describe is what a handler can see of m, in one string.
func describe(m *Message) string {
	r := m.Record
	var hs []string
	for _, h := range r.Headers {
		hs = append(hs, h.Key+"="+string(h.Value))
	}
	slices.Sort(hs)
	return fmt.Sprintf("%s/%d@%d key %q value %q headers %q time %v event %s session %s",
		r.Topic, r.Partition, r.Offset, r.Key, r.Value, hs, r.Timestamp.UTC(), m.EventID, m.SessionID)
}

func parkedRecords(c *Consumer) int {
	n := 0
	for _, p := range c.Stats().Partitions {
		n += p.Park.Records
	}
	return n
}

// makeDue makes session s's parked head due at once on every partition.
func makeDue(t *testing.T, c *Consumer, s string) {
	t.Helper()
	for _, p := range c.own.all() {
		p.mu.Lock()
		p.pk.set.Expedite(s)
		p.mu.Unlock()
	}
}

// parkReadFailures reports whether a retry of session s's head could not
// read it back: the head is due again only after the park delay.
func parkReadFailures(c *Consumer, s string) bool {
	for _, p := range c.own.all() {
		p.mu.Lock()
		failed := false
		for _, ps := range p.pk.set.ParkedSessions() {
			failed = failed || (ps.Session == s && !ps.Retrying && ps.NotBefore.After(time.Now().Add(time.Minute)))
		}
		p.mu.Unlock()
		if failed {
			return true
		}
	}
	return false
}

// deleteThrough deletes every record of topic's partition 0 so far and
// returns the new log start.
func deleteThrough(t *testing.T, e *env, topic string) int64 {
	t.Helper()
	adm := kadm.NewClient(e.client())
	ctx := context.Background()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o := kadm.Offsets{}
	ends.Each(func(l kadm.ListedOffset) { o.AddOffset(topic, l.Partition, l.Offset, -1) })
	end, _ := ends.Lookup(topic, 0)
	res, err := adm.DeleteRecords(ctx, o)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("delete the records of %s: %v", topic, err)
	}
	return end.Offset
}

// kafkaOutOfRange makes e's broker answer a fetch below a partition's log
// start as Apache Kafka does (ReplicaManager: an OFFSET_OUT_OF_RANGE
// partition carries log start, high watermark and last stable offset -1),
// not as kfake does (its true log start). gone(topic, start) says that
// partition 0 of topic starts at start now.
func kafkaOutOfRange(t *testing.T, e *env) (gone func(topic string, start int64)) {
	t.Helper()
	var mu sync.Mutex
	starts := map[string]int64{} // by topic name and by topic ID
	e.c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		mu.Lock()
		defer mu.Unlock()
		if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 {
			return nil, nil, false
		}
		rt, rp := req.Topics[0], req.Topics[0].Partitions[0]
		start, ok := starts[rt.Topic]
		if !ok {
			start, ok = starts[string(rt.TopicID[:])]
		}
		if !ok || rp.Partition != 0 || rp.FetchOffset >= start {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.SessionID = req.SessionID
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.Partition, sp.ErrorCode = 0, kerr.OffsetOutOfRange.Code
		sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
		st.Partitions = append(st.Partitions, sp)
		resp.Topics = append(resp.Topics, st)
		return resp, nil, true
	})
	adm := kadm.NewClient(e.client())
	return func(topic string, start int64) {
		tds, err := adm.ListTopics(context.Background(), topic)
		if err != nil {
			t.Fatal(err)
		}
		id := tds[topic].ID
		mu.Lock()
		defer mu.Unlock()
		starts[topic], starts[string(id[:])] = start, start
	}
}

// fetchBytes counts the bytes of fetch responses a client reads.
type fetchBytes struct{ n atomic.Int64 }

func (f *fetchBytes) OnBrokerRead(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, _ error) {
	if key == int16(kmsg.Fetch) {
		f.n.Add(int64(n))
	}
}

// TestParkReadAtOneBatch: reading a parked copy back fetches the batch
// that holds it and at most parkFetchBytes after it (for the read-ahead),
// not a megabyte of the park partition decoded per retry. Every offset of
// the partition is read back right, the first, a middle and the last of
// batches of several records included.
func TestParkReadAtOneBatch(t *testing.T) {
	e := newEnv(t, 1, "chats.park")
	var fb fetchBytes
	io := newParkIO(&Config{})
	io.client = e.client(kgo.WithHooks(&fb), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	value := make([]byte, 10_000) // incompressible
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	const n = 200
	for i := 0; i < n; i += 4 { // batches of four records
		var rs []*kgo.Record
		for j := range 4 {
			rs = append(rs, &kgo.Record{Topic: "chats.park", Key: []byte(strconv.Itoa(i + j)), Value: value})
		}
		if err := io.client.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for off := range int64(n) {
		before := fb.n.Load()
		r, _, err := io.readAt(ctx, "chats.park", 0, off)
		if err != nil {
			t.Fatalf("read back offset %d: %v", off, err)
		}
		if r.Offset != off || string(r.Key) != strconv.Itoa(int(off)) {
			t.Fatalf("read back offset %d: got offset %d key %q", off, r.Offset, r.Key)
		}
		if got := fb.n.Load() - before; got > int64(parkFetchBytes+5*len(value)) {
			t.Fatalf("reading offset %d back fetched %d bytes; its batch of 4 records has about %d, the read-ahead asks for %d more",
				off, got, 4*len(value), parkFetchBytes)
		}
	}
}

// TestParkReadFencedMeanwhile: a retry whose read back of its parked head
// is under way when the partition is fenced (here a shutdown; a revoke or
// a loss the same) starts no handler call once the read returns: a fenced
// partition starts nothing more (its next owner retries the head).
func TestParkReadFencedMeanwhile(t *testing.T) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	const stuck = "chat-stuck"
	produceSeqs(t, e, "chats", stuck, 0, 1)
	var calls atomic.Int32
	parked := make(chan struct{})
	rec := newRecorder(1, func(_ context.Context, m *Message) error {
		if calls.Add(1) == 1 {
			close(parked)
			return Park(errors.New("its backend is down"))
		}
		return nil
	})
	c, stop := startDueByHand(t, e, "g-park-fenced", rec, nil)
	<-parked
	eventually(t, "the record parked", func() bool { return parkedRecords(c) == 1 })
	tds, err := kadm.NewClient(e.client()).ListTopics(context.Background(), "chats.park")
	if err != nil {
		t.Fatal(err)
	}
	parkID := tds["chats.park"].ID
	reading, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.FetchRequest)
		if len(req.Topics) != 1 || (req.Topics[0].Topic != "chats.park" && req.Topics[0].TopicID != parkID) {
			e.c.KeepControl()
			return nil, nil, false
		}
		once.Do(func() { close(reading) })
		e.sleep(release)
		return nil, nil, false
	})
	makeDue(t, c, stuck)
	<-reading // the retry reads its head back
	parts := c.own.all()
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	eventually(t, "the partition fenced", func() bool {
		for _, p := range parts {
			if !p.isFenced() {
				return false
			}
		}
		return true
	})
	close(release) // the read back succeeds, after the fence
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the parked head was handled after its partition was fenced (%d calls, want 1)", n)
	}
}

// TestParkReadAtStaleLeader: readAt keeps the leaders it found; one that
// is out of date (the leader moved, the topic was made again) costs a
// fresh lookup, not a failed retry.
func TestParkReadAtStaleLeader(t *testing.T) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	r := &kgo.Record{Topic: "chats.park", Key: []byte("k"), Value: []byte("v")}
	if err := e.client().ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := e.config("g-park-stale", "chats")
	cfg.Park.Enabled = true
	c, err := New(cfg, HandlerFunc(func(context.Context, *Message) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.openPark(); err != nil {
		t.Fatal(err)
	}
	defer c.closePark()
	ctx := context.Background()
	good, err := c.park.leaderOf(ctx, "chats.park", 0)
	if err != nil {
		t.Fatal(err)
	}
	tp := topicPart{"chats.park", 0}
	for name, stale := range map[string]leaderOf{
		"another broker": {broker: good.broker + 7, topicID: good.topicID},
		"another topic":  {broker: good.broker, topicID: [16]byte{1, 2, 3}},
	} {
		c.park.leaders.put(tp, stale)
		got, _, err := c.park.readAt(ctx, "chats.park", 0, r.Offset)
		if err != nil || string(got.Value) != "v" {
			t.Fatalf("%s: read %v, %v; want the record", name, got, err)
		}
		if l, _ := c.park.leaders.get(tp); l != good {
			t.Fatalf("%s: cached %+v after the read, want %+v", name, l, good)
		}
	}
}

// TestParkDrainReadsAhead: a session draining its parked records reads
// them back a fetch's worth at a time, not with a fetch per record.
func TestParkDrainReadsAhead(t *testing.T) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	const stuck, n = "chat-stuck", 50
	var once sync.Once
	rec := newRecorder(n, func(_ context.Context, m *Message) error {
		var err error
		once.Do(func() { err = Park(errors.New("its backend is down")) })
		return err
	})
	c, stop := startDueByHand(t, e, "g-park-ahead", rec, nil)
	produceSeqs(t, e, "chats", stuck, 0, n)
	eventually(t, "every record parked", func() bool { return parkedRecords(c) == n })
	makeDue(t, c, stuck)
	rec.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, rec, []string{"chats"}, []string{stuck}, n)
	if f := c.park.fetches.Load(); f > n/5 {
		t.Fatalf("%d fetches to drain %d parked records; want a few (read ahead)", f, n)
	}
}

// TestParkReadFailureRetriedLater: a parked head that cannot be read back
// for now (here every fetch of the park partition answered
// NOT_LEADER_OR_FOLLOWER) is due again after the park delay, its retry
// budget untouched and its handler not called; once reads work again it
// is retried and its session unparks.
func TestParkReadFailureRetriedLater(t *testing.T) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	const stuck = "chat-stuck"
	produceSeqs(t, e, "chats", stuck, 0, 1)
	var calls atomic.Int32
	rec := newRecorder(1, func(_ context.Context, m *Message) error {
		if calls.Add(1) == 1 {
			return Park(errors.New("its backend is down"))
		}
		return nil
	})
	c, stop := startDueByHand(t, e, "g-park-read-fails", rec, func(pp *ParkPolicy) { pp.MaxAttempts = 1 })
	eventually(t, "the record parked", func() bool { return parkedRecords(c) == 1 })
	tds, err := kadm.NewClient(e.client()).ListTopics(context.Background(), "chats.park")
	if err != nil {
		t.Fatal(err)
	}
	parkID := tds["chats.park"].ID
	var failing atomic.Bool
	var refused atomic.Int32
	failing.Store(true)
	e.c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		if !failing.Load() || len(req.Topics) != 1 || (req.Topics[0].Topic != "chats.park" && req.Topics[0].TopicID != parkID) {
			return nil, nil, false
		}
		refused.Add(1)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = req.Topics[0].Topic, req.Topics[0].TopicID
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.ErrorCode = kerr.NotLeaderForPartition.Code
		st.Partitions = append(st.Partitions, sp)
		resp.Topics = append(resp.Topics, st)
		return resp, nil, true
	})
	makeDue(t, c, stuck)
	eventually(t, "a failed read back", func() bool { return parkReadFailures(c, stuck) })
	if h, _ := c.own.all()[0].parkHead(stuck); h.Retries != 0 || calls.Load() != 1 || refused.Load() == 0 {
		t.Fatalf("after a failed read back: %d retries counted, %d handler calls, %d fetches refused; want 0, 1, some",
			h.Retries, calls.Load(), refused.Load())
	}
	failing.Store(false)
	makeDue(t, c, stuck)
	finishUnparked(t, c, rec, stop)
}

// TestParkNeededFiltersReadAhead: of the records a head's fetch brought
// along, the read-ahead keeps only copies still parked: not those of
// sessions no longer parked, not markers, not copies already done.
func TestParkNeededFiltersReadAhead(t *testing.T) {
	p := newPartition(context.Background(), partKey{"chats", 0}, 1, 100, func(*partition) {})
	p.enablePark(parkset.Rules{Delay: time.Second, MaxDelay: time.Second, MaxAttempts: 3}, "g", 1, "classic")
	now := time.Now()
	p.pk.set.Add("a", 5, 50, now)
	p.pk.set.Add("a", 6, 51, now)
	p.pk.set.Add("b", 7, 52, now)
	p.pk.set.Done("b", 52, 9, now) // b's copy at 7 is done
	at := func(off int64, session string) *kgo.Record {
		return &kgo.Record{Offset: off, Headers: []kgo.RecordHeader{{Key: parkwire.HeaderSession, Value: []byte(session)}}}
	}
	got := p.parkNeeded([]*kgo.Record{at(6, "a"), at(7, "b"), at(8, "a"), at(9, "b"), at(10, "c")})
	if len(got) != 1 || got[0].Offset != 6 {
		var offs []int64
		for _, r := range got {
			offs = append(offs, r.Offset)
		}
		t.Fatalf("kept offsets %v; want [6] (a's second parked copy)", offs)
	}
}

// TestParkReadWrongEntry: when the entry at a parked head's park offset is
// not its copy (the park topic made again while the session was parked, or
// a stale read-ahead; another group's copy of the same source record), the
// head is read from its source partition: the handler sees the record it
// saw first and the session unparks.
func TestParkReadWrongEntry(t *testing.T) {
	for _, other := range []bool{false, true} {
		t.Run(map[bool]string{false: "another record", true: "another group's copy"}[other], func(t *testing.T) {
			testParkReadWrongEntry(t, other)
		})
	}
}

func testParkReadWrongEntry(t *testing.T, otherGroup bool) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	const stuck = "chat-stuck"
	produceSeqs(t, e, "chats", stuck, 0, 1)
	var mu sync.Mutex
	var seen []string
	rec := newRecorder(1, func(_ context.Context, m *Message) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, describe(m))
		if len(seen) == 1 {
			return Park(errors.New("its backend is down"))
		}
		return nil
	})
	c, stop := startDueByHand(t, e, "g-park-wrong", rec, nil)
	eventually(t, "the record parked", func() bool { return parkedRecords(c) == 1 })
	p := c.own.all()[0]
	h, _ := p.parkHead(stuck)
	wrong := c.park.w.Copy(&kgo.Record{Topic: "chats", Offset: 999, Key: []byte(stuck), Value: []byte("another")}, stuck, 0, 1, time.Now(), time.Now(), "")
	if otherGroup {
		cfg := c.cfg
		cfg.Group = "another-group"
		other := newParkIO(&cfg)
		wrong = other.w.Copy(&kgo.Record{Topic: "chats", Offset: h.SrcOffset, Key: []byte(stuck), Value: []byte("another group's")}, stuck, 0, 1, time.Now(), time.Now(), "")
	}
	wrong.Offset = h.ParkOffset
	p.parkAhead().Keep([]*kgo.Record{wrong})
	makeDue(t, c, stuck)
	finishUnparked(t, c, rec, stop)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != seen[1] {
		t.Fatalf("the handler saw %q", seen)
	}
}

// finishUnparked waits for every message rec expects and for c to hold
// nothing parked, then stops c.
func finishUnparked(t *testing.T, c *Consumer, rec *recorder, stop func() error) {
	t.Helper()
	rec.wait(t)
	eventually(t, "the session unparked", func() bool { return parkedRecords(c) == 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// startDueByHand starts a consumer of "chats" in group with parking on,
// its parked heads due only when the test says (makeDue): their delay is
// an hour. edit, when set, changes the policy further.
func startDueByHand(t *testing.T, e *env, group string, h Handler, edit func(*ParkPolicy)) (*Consumer, func() error) {
	t.Helper()
	cfg := e.config(group, "chats")
	cfg.Park = ParkPolicy{Enabled: true, Delay: time.Hour, MaxDelay: time.Hour}
	if edit != nil {
		edit(&cfg.Park)
	}
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	return c, start(t, c)
}
