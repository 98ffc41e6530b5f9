package hashring

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPartitioner: each scheme's partitioner places a key where the
// scheme's own function does, and stamps the placement it made (scheme
// and count) on keyed records, once, also when a record is placed again
// over another count; a keyless record gets no stamp.
func TestPartitioner(t *testing.T) {
	for _, scheme := range []Scheme{SchemeKafka, SchemeJump} {
		tp := Partitioner(scheme).ForTopic("t")
		for i := range 200 {
			key := "chat-" + strconv.Itoa(i)
			r := &kgo.Record{Key: []byte(key)}
			for _, n := range []int{6, 12} {
				got := tp.Partition(r, n)
				want, err := Placement{Scheme: scheme, Count: n}.Partition(r.Key, n)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("scheme %d, %s over %d: partition %d, want %d", scheme, key, n, got, want)
				}
				var stamps []string
				for _, h := range r.Headers {
					if h.Key == HeaderPlacement {
						stamps = append(stamps, string(h.Value))
					}
				}
				if wantStamp := (Placement{Scheme: scheme, Count: n}).String(); len(stamps) != 1 || stamps[0] != wantStamp {
					t.Fatalf("scheme %d, %s over %d: stamps %q, want [%q]", scheme, key, n, stamps, wantStamp)
				}
			}
		}
		r := &kgo.Record{}
		_ = tp.Partition(r, 6)
		if len(r.Headers) != 0 {
			t.Fatalf("scheme %d: a keyless record was stamped: %v", scheme, r.Headers)
		}
	}
}
