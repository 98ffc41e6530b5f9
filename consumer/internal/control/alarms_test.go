package control

import (
	"sync"
	"testing"
	"time"
)

// TestAlarmsInOrder: alarms set out of order are called in time order,
// each once; an alarm already due is called at once; Run ends when done
// is closed, dropping what is left.
func TestAlarmsInOrder(t *testing.T) {
	a := NewAlarms()
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() { defer close(ended); a.Run(done) }()
	var mu sync.Mutex
	var got []int
	all := make(chan struct{})
	base := time.Now()
	for _, i := range []int{3, 1, 4, 0, 2} {
		a.At(base.Add(time.Duration(i)*5*time.Millisecond), func() {
			mu.Lock()
			defer mu.Unlock()
			if got = append(got, i); len(got) == 5 {
				close(all)
			}
		})
	}
	<-all
	mu.Lock()
	for i, v := range got {
		if v != i {
			t.Fatalf("alarms called in order %v; want 0..4", got)
		}
	}
	mu.Unlock()
	a.At(base.Add(time.Hour), func() { t.Error("an alarm an hour away was called") })
	if a.Len() != 1 {
		t.Fatalf("%d alarms set; want 1", a.Len())
	}
	close(done)
	<-ended
	if a.Len() != 0 {
		t.Fatalf("%d alarms left after Run ended", a.Len())
	}
}
