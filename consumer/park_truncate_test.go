package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/parkset"
)

// TestTruncationLowersParkFloors: a source log truncation that admit sees
// (an unclean leader election: offsets reused) reaches the parked set,
// whose floors described the old log: a new record at a reused offset at
// or below its session's old floor is not taken for one done before.
// Before the fix only the completed offsets were forgotten, and the new
// record at 97 was skipped unhandled.
func TestTruncationLowersParkFloors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fetch func(p *partition) int // the truncation's fetch; its count of truncations
	}{
		{"seen by the tracker", func(p *partition) int {
			_, _, n := p.admit([]*kgo.Record{{Offset: 97}}, 98, nil, func(int, uint64) {})
			return n
		}},
		{"below the commit, at the first fetch", func(p *partition) int {
			q := newPartition(context.Background(), partKey{"chats", 0}, 1, 10, nil)
			q.pk = p.pk // the parked set as a rebuild left it; nothing fetched yet
			q.resume(101, nil, "")
			_, _, n := q.admit([]*kgo.Record{{Offset: 97}}, 98, nil, func(int, uint64) {})
			return n
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPartition(context.Background(), partKey{"chats", 0}, 1, 10, nil)
			p.enablePark(parkset.Rules{Delay: time.Second, MaxDelay: time.Second, MaxAttempts: 1}, "g", 1, "classic")
			p.parkCommitted("")
			p.resume(98, nil, "")
			p.admit([]*kgo.Record{{Offset: 98}, {Offset: 99}, {Offset: 100}}, 101, nil, func(int, uint64) {})
			p.mu.Lock()
			p.pk.set.Add("s", 5, 100, time.Now()) // s's record at 100 parked: its floor is 100
			p.mu.Unlock()
			if seen, _ := p.parkCheck("s", 97); !seen {
				t.Fatal("before the truncation 97 is below s's floor: seen")
			}
			if n := tc.fetch(p); n == 0 {
				t.Fatal("no truncation seen")
			}
			if seen, _ := p.parkCheck("s", 97); seen {
				t.Fatal("the new record at the reused offset 97 is taken for one done before (floor 100 of the old log): skipped unhandled")
			}
		})
	}
}
