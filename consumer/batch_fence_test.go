package consumer

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBatchFenced: a batch mixes a session's records from two partitions
// (t/0 offsets 7 and 8, t/1 offset 3). t/0 is revoked while the first call
// runs, which then fails: t/0's records leave the batch undone (the next
// owner runs them) and its drain completes; the next call holds t/1's
// record alone. A second case fences during a partial success: the done
// record counts, the one behind it is left.
func TestBatchFenced(t *testing.T) {
	for _, tc := range []struct {
		name      string
		first     error
		wantCalls [][]int64 // offsets per call
		wantWM0   int64
	}{
		{"whole", errors.New("database busy"), [][]int64{{7, 3, 8}, {3}}, 7},
		{"partial", &BatchError{Done: 1, Err: errors.New("row conflict")}, [][]int64{{7, 3, 8}, {3}}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started := make(chan struct{})
			release := make(chan struct{})
			var calls [][]int64
			c, err := NewBatch(Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "d"},
				BatchHandlerFunc(func(ctx context.Context, ms []*Message) error {
					var offs []int64
					for _, m := range ms {
						offs = append(offs, m.Record.Offset)
					}
					calls = append(calls, offs)
					if len(calls) == 1 {
						close(started)
						<-release
						return tc.first
					}
					return nil
				}))
			if err != nil {
				t.Fatal(err)
			}
			c.workCtx, c.cancelWork = context.WithCancel(context.Background())
			defer c.cancelWork()

			parts := map[int32]*partition{}
			for _, p := range c.own.assign(map[string][]int32{"t": {0, 1}}, 100, nil) {
				parts[p.key.partition] = p
			}
			var ws []*work
			add := func(p int32, off int64) {
				rec := &kgo.Record{Topic: "t", Partition: p, Offset: off, Key: []byte("s")}
				parts[p].admit([]*kgo.Record{rec}, off+1, nil, func(_ int, seq uint64) {
					ws = append(ws, &work{rec: rec, p: parts[p], seq: seq, session: "s"})
				})
			}
			add(0, 7)
			add(1, 3)
			add(0, 8)
			l := &lane{key: "s"}
			done := make(chan struct{})
			go func() { defer close(done); c.processBatch(l, ws) }()
			<-started
			c.own.release(c.own.lookup(map[string][]int32{"t": {0}}))
			close(release)
			<-done

			if len(calls) != len(tc.wantCalls) {
				t.Fatalf("calls %v, want %v", calls, tc.wantCalls)
			}
			for i := range calls {
				if len(calls[i]) != len(tc.wantCalls[i]) {
					t.Fatalf("calls %v, want %v", calls, tc.wantCalls)
				}
				for j := range calls[i] {
					if calls[i][j] != tc.wantCalls[i][j] {
						t.Fatalf("calls %v, want %v", calls, tc.wantCalls)
					}
				}
			}
			if got := parts[0].tr.Watermark(); got != tc.wantWM0 {
				t.Errorf("fenced t/0 watermark %d, want %d", got, tc.wantWM0)
			}
			if got := parts[1].tr.Watermark(); got != 4 {
				t.Errorf("t/1 watermark %d, want 4", got)
			}
			select {
			case <-parts[0].drained:
			default:
				t.Error("t/0 not drained after the batch")
			}
		})
	}
}
