package consumer

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestInspectParkedNoParkTopic: InspectParked of a topic without a park
// topic (parking not used for it, or another suffix) returns an error
// wrapping ErrTopicMissing that names the park topic and what to check;
// so does ReleaseHeld, which reads the same.
func TestInspectParkedNoParkTopic(t *testing.T) {
	e := newEnv(t, 1, "orders")
	pt := ParkTarget{Brokers: e.addrs, Group: "g-no-park", Topic: "orders"}
	_, err := InspectParked(context.Background(), pt)
	if !errors.Is(err, ErrTopicMissing) || !strings.Contains(err.Error(), "orders.park") || !strings.Contains(err.Error(), "TopicSuffix") {
		t.Fatalf("InspectParked: %v; want ErrTopicMissing naming orders.park and TopicSuffix", err)
	}
	if _, err := ReleaseHeld(context.Background(), pt, "alice"); !errors.Is(err, ErrTopicMissing) {
		t.Fatalf("ReleaseHeld: %v; want ErrTopicMissing", err)
	}
}
