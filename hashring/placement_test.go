package hashring

import (
	"errors"
	"testing"
)

func TestPlacementRoundTrip(t *testing.T) {
	for _, p := range []Placement{{SchemeKafka, 1}, {SchemeKafka, 8}, {SchemeJump, 3}, {SchemeJump, 1000}} {
		got, err := ParsePlacement([]byte(p.String()))
		if err != nil || got != p {
			t.Fatalf("ParsePlacement(%q) = %+v, %v; want %+v", p.String(), got, err, p)
		}
	}
}

func TestParsePlacementBad(t *testing.T) {
	for _, v := range []string{"", "kafka", "kafka/", "kafka/0", "kafka/-1", "jump/x", "murmur/8", "/8"} {
		if _, err := ParsePlacement([]byte(v)); !errors.Is(err, ErrBadPlacement) {
			t.Errorf("ParsePlacement(%q) err = %v, want ErrBadPlacement", v, err)
		}
	}
}

// TestPlacementPartition checks that a placement maps a key as the
// scheme's own function does.
func TestPlacementPartition(t *testing.T) {
	for _, k := range randomKeys(200, 7) {
		for n := 1; n <= 12; n++ {
			kp, _ := KafkaPartition([]byte(k), n)
			jp, _ := JumpPartition(k, n)
			if got, _ := (Placement{SchemeKafka, 99}).Partition([]byte(k), n); got != kp {
				t.Fatalf("kafka %q/%d = %d, want %d", k, n, got, kp)
			}
			if got, _ := (Placement{SchemeJump, 99}).Partition([]byte(k), n); got != jp {
				t.Fatalf("jump %q/%d = %d, want %d", k, n, got, jp)
			}
		}
	}
}
