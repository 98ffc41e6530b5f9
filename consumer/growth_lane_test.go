package consumer

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/hashring"
)

// produceAt writes record seq of session s on partition part, stamped pl.
func (e *env) produceAt(topic, s string, seq int, part int32, pl hashring.Placement) {
	e.t.Helper()
	cl := e.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	r := &kgo.Record{Topic: topic, Partition: part, Key: []byte(s), Value: []byte(s + "|" + strconv.Itoa(seq)),
		Headers: []kgo.RecordHeader{{Key: hashring.HeaderPlacement, Value: []byte(pl.String())}}}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
}

// TestGrowthSameMemberOlderArrivesLater: one member owns a moved session's
// old partition q and its new one p. The session's new record R (on p)
// reaches its lane before its old record X (held back on q by
// backpressure behind a blocked record), and waits for q's floor, which X
// holds. X, arriving in the lane behind the waiting R, runs first: the
// session's two records are handled, X then R. (Before, R waited for ever
// in front of X.)
func TestGrowthSameMemberOlderArrivesLater(t *testing.T) {
	e := newEnv(t, 2, "chats")
	pl2 := hashring.Placement{Scheme: hashring.SchemeKafka, Count: 2}
	pl6 := hashring.Placement{Scheme: hashring.SchemeKafka, Count: 6}
	var s string
	for _, c := range sessionNames(100) {
		a, _ := pl2.Partition([]byte(c), 2)
		b, _ := pl6.Partition([]byte(c), 6)
		if a != b {
			s = c
			break
		}
	}
	qq, _ := pl2.Partition([]byte(s), 2)
	pp, _ := pl6.Partition([]byte(s), 6)
	q, p := int32(qq), int32(pp)
	gate := make(chan struct{})
	var mu sync.Mutex
	var order []int
	done := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, m *Message) error {
		if string(m.Record.Key) == "blocker" {
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if string(m.Record.Key) == s {
			_, seq := parseValue(m.Record.Value)
			mu.Lock()
			if order = append(order, seq); len(order) == 2 {
				close(done)
			}
			mu.Unlock()
		}
		return nil
	})
	cfg := e.config("g", "chats")
	cfg.MaxBufferedRecords = 8
	cfg.MaxPollRecords = 4
	cfg.ClientOptions = append(cfg.ClientOptions, kgo.MetadataMinAge(50*time.Millisecond), kgo.MetadataMaxAge(200*time.Millisecond))
	c, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	e.produceAt("chats", "blocker", 0, q, pl2)
	for i := range 30 {
		e.produceAt("chats", fmt.Sprintf("filler-%d", i), 0, q, pl2)
	}
	e.produceAt("chats", s, 0, q, pl2) // X: older, on its old partition, behind the full buffer
	waitFor(t, "q full", func() bool {
		for _, ps := range c.Stats().Partitions {
			if ps.Partition == q && ps.Paused {
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("%+v", c.Stats().Partitions) })
	e.grow("chats", 6)
	waitFor(t, "the new partitions assigned", func() bool { return len(c.Stats().Partitions) == 6 }, nil)
	e.produceAt("chats", s, 1, p, pl6) // R: newer, on its new partition
	waitFor(t, "R waiting", func() bool {
		g := c.Stats().Growing
		return len(g) == 1 && g[0].Waiting == 1
	}, func() string { return fmt.Sprintf("%+v", c.Stats().Growing) })
	close(gate)
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatalf("session %s (X on %d, R on %d): handled %v; growing %+v", s, q, p, order, c.Stats().Growing)
	}
	mu.Lock()
	defer mu.Unlock()
	if order[0] != 0 || order[1] != 1 {
		t.Fatalf("session %s handled in order %v, want [0 1]", s, order)
	}
}
