package hashring

import (
	"errors"
	"testing"
)

// TestKafkaPartitionMatchesJava checks the murmur2 values from Kafka's own
// UtilsTest: for n = 2^31-1, (murmur2 & 0x7fffffff) % n is the masked hash
// itself, so the partition exposes the hash Java computes.
func TestKafkaPartitionMatchesJava(t *testing.T) {
	vectors := map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	}
	for key, h := range vectors {
		want := int(uint32(h) & 0x7fffffff)
		got, err := KafkaPartition([]byte(key), 1<<31-1)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("KafkaPartition(%q, 2^31-1) = %d, want %d (Java murmur2 %d)", key, got, want, h)
		}
		// And for a realistic partition count, Java's formula.
		got12, _ := KafkaPartition([]byte(key), 12)
		if got12 != want%12 {
			t.Errorf("KafkaPartition(%q, 12) = %d, want %d", key, got12, want%12)
		}
	}
}

func TestKafkaPartitionBadInput(t *testing.T) {
	for _, n := range []int{0, -3} {
		if _, err := KafkaPartition([]byte("k"), n); !errors.Is(err, ErrBadPartitions) {
			t.Errorf("KafkaPartition(k, %d) err = %v, want ErrBadPartitions", n, err)
		}
	}
	a, err := KafkaPartition(nil, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := KafkaPartition([]byte{}, 7)
	if a != b {
		t.Errorf("nil key → %d, empty key → %d; documented as equal", a, b)
	}
}
