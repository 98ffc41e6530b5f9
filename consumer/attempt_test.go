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
	a := newAttemptCtx(parent, time.Now(), 20*time.Millisecond)
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
	a := newAttemptCtx(context.Background(), time.Now(), time.Nanosecond)
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
	a := newAttemptCtx(parent, time.Now(), time.Hour)
	defer a.release()
	done := a.Done()
	cancel()
	<-done
	if !errors.Is(a.Err(), context.Canceled) {
		t.Fatalf("Err = %v, want Canceled", a.Err())
	}
	// Derived contexts follow it too.
	a2 := newAttemptCtx(context.Background(), time.Now(), time.Hour)
	child, stop := context.WithCancel(a2)
	defer stop()
	a2.release()
	<-child.Done()
	if !errors.Is(child.Err(), context.Canceled) {
		t.Fatalf("child Err = %v", child.Err())
	}
}

func BenchmarkAttemptCtx(b *testing.B) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.Run("lazy", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			a := newAttemptCtx(parent, time.Now(), time.Minute)
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
