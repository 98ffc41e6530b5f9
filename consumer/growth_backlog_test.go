package consumer

import (
	"context"
	"testing"

	"github.com/lanesdev/lanes/hashring"
)

// TestGrowthNewGroupBacklog: a topic grew from 3 to 6 partitions before
// a new group started on it (no commit tells it of the change), with a
// backlog of records placed with both counts (PartitionJump), far above
// MaxBufferedRecords. The group learns the older count from the first
// records it reads, and every session is handled in order. (Before, the
// stamps taught only newer counts: over a thousand records of moved
// sessions ran out of order.) With Kafka's partitioner the same run stops:
// the waits close a circle through full buffers (a documented limit).
func TestGrowthNewGroupBacklog(t *testing.T) {
	const per = 40
	e := newEnv(t, 3, "chats")
	sessions := sessionNames(60)
	pl3 := hashring.Placement{Scheme: hashring.SchemeJump, Count: 3}
	e.produceStamped("chats", sessions, 0, per, pl3)
	e.grow("chats", 6)
	e.produceStamped("chats", sessions, per, 2*per, hashring.Placement{Scheme: hashring.SchemeJump, Count: 6})
	if len(moved(sessions, pl3, 3, 6)) == 0 {
		t.Fatal("no session moves: the test proves nothing")
	}
	rec := newRecorder(len(sessions)*2*per, func(context.Context, *Message) error { return nil })
	cfg := e.config("g", "chats")
	cfg.MaxBufferedRecords, cfg.MaxPollRecords = 64, 8 // the old and new records of a session are not in memory together
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, rec, []string{"chats"}, sessions, 2*per)
	if c.Stats().MovedReleased == 0 {
		t.Error("MovedReleased = 0: no moved session waited")
	}
}
