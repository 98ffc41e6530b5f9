package eventid

import (
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"
)

// Golden values, checked independently with Python's uuid.uuid5.
func TestForSequenceGolden(t *testing.T) {
	want := uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/lanesdev/lanes/eventid"))
	if namespace != want || Namespace != want.String() {
		t.Fatalf("Namespace = %s, want the URL-namespace UUIDv5 %s", Namespace, want)
	}
	cases := []struct {
		session string
		seq     uint64
		want    string
	}{
		{"chat-1", 7, "ebeaf061-8662-5fac-8a1d-6566cc5de52f"},
		{"chat-1", 8, "15f601ab-6c8b-57e9-8ac7-6967fa342488"},
		{"", 0, "40f9c0f4-3574-54a8-8a75-9149dfff7b2d"},
	}
	for _, c := range cases {
		if got := ForSequence(c.session, c.seq); got != c.want {
			t.Errorf("ForSequence(%q, %d) = %s, want %s", c.session, c.seq, got, c.want)
		}
	}
	if ForSequence("a1", 2) == ForSequence("a", 12) {
		t.Error("session and sequence are not separated")
	}
}

func TestNewIsV7AndMonotonic(t *testing.T) {
	prev := ""
	for i := 0; i < 10_000; i++ { // many fall in the same millisecond
		id := New()
		u, err := uuid.Parse(id)
		if err != nil {
			t.Fatal(err)
		}
		if u.Version() != 7 {
			t.Fatalf("%s is version %d, want 7", id, u.Version())
		}
		if id <= prev {
			t.Fatalf("not monotonic: %s after %s", id, prev)
		}
		prev = id
	}
}

func TestNewUniqueUnderConcurrency(t *testing.T) {
	const goroutines, each = 8, 5000
	var mu sync.Mutex
	seen := make(map[string]bool, goroutines*each)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]string, each)
			for i := range local {
				local[i] = New()
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range local {
				if seen[id] {
					t.Errorf("duplicate ID %s", id)
				}
				seen[id] = true
			}
		}()
	}
	wg.Wait()
	if len(seen) != goroutines*each {
		t.Fatalf("got %d unique IDs, want %d", len(seen), goroutines*each)
	}
}

func TestParse(t *testing.T) {
	good := []struct{ in, want string }{
		{"ebeaf061-8662-5fac-8a1d-6566cc5de52f", "ebeaf061-8662-5fac-8a1d-6566cc5de52f"},
		{"EBEAF061-8662-5FAC-8A1D-6566CC5DE52F", "ebeaf061-8662-5fac-8a1d-6566cc5de52f"},
	}
	for _, c := range good {
		got, err := Parse(c.in)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	bad := []string{
		"",
		"not-a-uuid",
		"ebeaf06186625fac8a1d6566cc5de52f",
		"{ebeaf061-8662-5fac-8a1d-6566cc5de52f}",
		"urn:uuid:ebeaf061-8662-5fac-8a1d-6566cc5de52f",
		"ebeaf061-8662-5fac-8a1d-6566cc5de52g",
		"ebeaf061x8662-5fac-8a1d-6566cc5de52f",
	}
	for _, in := range bad {
		if _, err := Parse(in); !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q) err = %v, want ErrMalformed", in, err)
		}
	}
}
