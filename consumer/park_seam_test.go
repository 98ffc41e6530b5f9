package consumer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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
	p.enablePark(c.cfg.Park.rules())
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
