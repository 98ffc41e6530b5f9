package consumer

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShutdownCleanWhenLeaveIsSlow: a clean shutdown (every record
// handled, nothing left in the dead-letter client) whose leave takes longer
// than CommitTimeout (the group's coordinator is slow to answer, or the
// leave waits for a join under way) returns nil. The dead-letter client's
// flush has nothing to wait for and must not report the commit's deadline,
// spent by the leave, as an error of Run.
func TestShutdownCleanWhenLeaveIsSlow(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	sessions := sessionNames(4)
	e.produce("chats", sessions, 1)
	rec := newRecorder(len(sessions), nil)
	cfg := e.config("g-slow-leave", "chats")
	cfg.CommitTimeout, cfg.LeaveTimeout = 300*time.Millisecond, 10*time.Second
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop, wait := runMember(t, c, "A")
	rec.wait(t)
	eventually(t, "everything committed", func() bool {
		ps := c.Stats().Partitions
		return len(ps) == 1 && ps[0].Committed == int64(len(sessions))
	})
	e.c.ControlKey(int16(kmsg.LeaveGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		// An injected delay of the broker's answer, not a synchronisation.
		e.sleepFor(3 * cfg.CommitTimeout)
		return nil, nil, false
	})
	stop()
	if err := wait(); err != nil {
		t.Fatalf("Run after a clean drain and a slow leave: %v, want nil", err)
	}
}
