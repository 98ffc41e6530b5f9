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
