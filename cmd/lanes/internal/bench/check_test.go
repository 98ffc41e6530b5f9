package bench

import (
	"testing"
	"time"
)

// TestTallyReferee: the tally counts every gap, repeat, overtaking and
// overlapping call, and foreign record, and ends the run only once every
// session had all of its messages.
func TestTallyReferee(t *testing.T) {
	w := workload{Name: "t", Mode: "closed", Sessions: 3, Messages: 9}
	p := w.plan()
	msg := func(sess, seq uint32) []byte { return encodeValue(nil, sess, seq, 0, 0) }
	finished := func(tl *tally) bool {
		select {
		case <-tl.finished:
			return true
		default:
			return false
		}
	}
	t.Run("in order", func(t *testing.T) {
		tl := newTally(w, p, time.Now())
		for seq := range uint32(3) {
			for sess := range uint32(3) {
				if finished(tl) {
					t.Fatalf("finished before session %d seq %d", sess, seq)
				}
				_ = tl.handle(msg(sess, seq), 1)
			}
		}
		if !finished(tl) || tl.handled() != 9 || tl.violations.Load() != 0 || tl.overlaps.Load() != 0 {
			t.Fatalf("finished %v, handled %d, violations %d, overlaps %d; want true, 9, 0, 0",
				finished(tl), tl.handled(), tl.violations.Load(), tl.overlaps.Load())
		}
		if got := len(tl.completions()); got != 9 {
			t.Fatalf("%d completion times, want 9", got)
		}
	})
	for _, tc := range []struct {
		name string
		seqs []uint32 // of session 1, in the order handled
		want int64
	}{
		{"gap", []uint32{0, 2}, 1},
		{"repeat", []uint32{0, 1, 1}, 1},
		{"overtaking", []uint32{1, 0}, 2},
		{"beyond the plan", []uint32{0, 1, 2, 3}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := newTally(w, p, time.Now())
			for _, seq := range tc.seqs {
				_ = tl.handle(msg(1, seq), 1)
			}
			if got := tl.violations.Load(); got != tc.want {
				t.Fatalf("session 1 handled %v: %d violations, want %d", tc.seqs, got, tc.want)
			}
		})
	}
	t.Run("foreign and overlapping", func(t *testing.T) {
		tl := newTally(w, p, time.Now())
		_ = tl.handle([]byte("not a bench value"), 1)
		_ = tl.handle(msg(7, 0), 1)
		tl.sess[2].busy.Store(true) // a call of session 2 is running
		_ = tl.handle(msg(2, 0), 1)
		if tl.violations.Load() != 2 || tl.overlaps.Load() != 1 {
			t.Fatalf("%d violations, %d overlaps; want 2 and 1", tl.violations.Load(), tl.overlaps.Load())
		}
	})
}

func TestSteadyRate(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		var out []time.Duration
		for _, x := range xs {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	ten := ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10) // the 1st at 1 ms … the 10th at 10 ms
	for _, tc := range []struct {
		name    string
		done    []time.Duration
		total   int64
		elapsed time.Duration
		want    float64
	}{
		{"finished: 1st to 9th", ten, 10, 20 * time.Millisecond, 8 / 0.008},
		{"cut short: from the 1st to the end", ten[:5], 10, 21 * time.Millisecond, 4 / 0.020},
		// A run that stalls past 90 % (a session stuck to the cap) is not
		// judged by its rate before the stall.
		{"cut short past 90 %: from the 1st to the end", ten[:9], 10, time.Second, 8 / 0.999},
		{"no further than 10 %", ten[:1], 10, 30 * time.Millisecond, 123},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := steadyRate(tc.done, tc.total, tc.elapsed, 123)
			if d := got - tc.want; d > 1e-6 || d < -1e-6 {
				t.Fatalf("steady %.3f msg/s, want %.3f", got, tc.want)
			}
		})
	}
}
