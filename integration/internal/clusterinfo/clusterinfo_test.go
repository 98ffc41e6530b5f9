package clusterinfo

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The questions on an embedded three-broker cluster (kfake). Controller
// needs DescribeQuorum, which kfake does not answer: the broker-fault
// scenario that kills the controller checks it on real Kafka.
func TestClusterQuestions(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	leaders, err := Leaders(ctx, cl, "orders")
	if err != nil || len(leaders) != 3 {
		t.Fatalf("Leaders: %v, %v", leaders, err)
	}
	for p, want := range leaders {
		got, err := Leader(ctx, cl, "orders", p)
		if err != nil || got != want || got < 0 || got > 2 {
			t.Errorf("Leader(orders, %d) = %d, %v; Leaders says %d", p, got, err, want)
		}
	}
	if _, err := Leader(ctx, cl, "orders", 7); err == nil {
		t.Error("Leader of a partition the topic lacks: no error")
	}
	if _, err := Leader(ctx, cl, "missing", 0); err == nil {
		t.Error("Leader of a missing topic: no error")
	}
	if _, err := Leaders(ctx, cl, "missing"); err == nil {
		t.Error("Leaders of a missing topic: no error")
	}
	under, err := UnderReplicated(ctx, cl, "orders")
	if err != nil || len(under) != 0 {
		t.Errorf("UnderReplicated: %v, %v; want none", under, err)
	}
	coord, err := GroupCoordinator(ctx, cl, "g")
	if err != nil || coord < 0 || coord > 2 {
		t.Errorf("GroupCoordinator: %d, %v", coord, err)
	}
}
