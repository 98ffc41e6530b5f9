package consumer

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKeyT struct{}

func TestAttemptCtxDeadline(t *testing.T) {
	parent := context.WithValue(context.Background(), ctxKeyT{}, "v")
	a := newAttemptCtx(parent, stampNow(), 20*time.Millisecond)
	defer a.release()
	if a.Value(ctxKeyT{}) != "v" {
		t.Fatal("value of parent not visible")
	}
	if d, ok := a.Deadline(); !ok || time.Until(d) > 20*time.Millisecond {
		t.Fatalf("deadline %v %v", d, ok)
	}
	if a.Err() != nil {
		t.Fatal("Err before the deadline")
	}
	<-a.Done() // fires through the lazily armed timer
	if !errors.Is(a.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v, want DeadlineExceeded", a.Err())
	}
}

func TestAttemptCtxDeadlineWithoutDone(t *testing.T) {
	a := newAttemptCtx(context.Background(), stampNow(), time.Nanosecond)
	defer a.release()
	deadline, _ := a.Deadline()
	for time.Now().Before(deadline) {
	}
	if !errors.Is(a.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v after the deadline, want DeadlineExceeded", a.Err())
	}
	select {
	case <-a.Done():
	default:
		t.Fatal("Done not closed although Err is set")
	}
}

func TestAttemptCtxParentCancel(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	a := newAttemptCtx(parent, stampNow(), time.Hour)
	defer a.release()
	done := a.Done()
	cancel()
	<-done
	if !errors.Is(a.Err(), context.Canceled) {
		t.Fatalf("Err = %v, want Canceled", a.Err())
	}
	// Derived contexts follow it too.
	a2 := newAttemptCtx(context.Background(), stampNow(), time.Hour)
	child, stop := context.WithCancel(a2)
	defer stop()
	a2.release()
	<-child.Done()
	if !errors.Is(child.Err(), context.Canceled) {
		t.Fatalf("child Err = %v", child.Err())
	}
}

// TestAttemptCtxDoneAfterEnd: the first call of Done comes after the
// context ended (its parent cancelled by a revoke or the shutdown, or its
// deadline passed while the handler computed): Done is closed, once.
func TestAttemptCtxDoneAfterEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func() *attemptCtx
		want error
	}{
		{"parent cancelled", func() *attemptCtx {
			parent, cancel := context.WithCancel(context.Background())
			cancel()
			return newAttemptCtx(parent, stampNow(), time.Hour)
		}, context.Canceled},
		{"deadline passed", func() *attemptCtx {
			return newAttemptCtx(context.Background(), stampOf(time.Now().Add(-time.Second)), time.Millisecond)
		}, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.make()
			defer a.release()
			select {
			case <-a.Done():
			default:
				t.Fatal("Done not closed")
			}
			if !errors.Is(a.Err(), tc.want) {
				t.Fatalf("Err = %v, want %v", a.Err(), tc.want)
			}
		})
	}
}

func BenchmarkAttemptCtx(b *testing.B) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.Run("lazy", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			a := newAttemptCtx(parent, stampNow(), time.Minute)
			_ = a.Err()
			a.release()
		}
	})
	b.Run("context.WithTimeout", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			ctx, c := context.WithTimeout(parent, time.Minute)
			_ = ctx.Err()
			c()
		}
	})
}
