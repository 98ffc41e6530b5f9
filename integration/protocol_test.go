package integration

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The consumer group protocol the suite runs under, from
// LANES_GROUP_PROTOCOL: "classic" (the default: franz-go's client-side
// cooperative-sticky balancing) or "consumer" (KIP-848: the broker assigns,
// Kafka 4.0+). The names are Kafka's group.protocol values and the group
// types the broker lists.
const (
	protocolClassic  = "classic"
	protocolConsumer = "consumer"
)

// groupProtocol returns the protocol the suite runs under; it panics on an
// unknown value so a typo never silently runs the classic suite twice.
func groupProtocol() string {
	switch p := os.Getenv("LANES_GROUP_PROTOCOL"); p {
	case "", protocolClassic:
		return protocolClassic
	case protocolConsumer:
		return protocolConsumer
	default:
		panic(fmt.Sprintf("LANES_GROUP_PROTOCOL=%q: want %q or %q", p, protocolClassic, protocolConsumer))
	}
}

// protocolOpts are the client options that select the protocol: for
// KIP-848, kgo.ServerSideBalancer, which franz-go honours because lanes'
// balancer (cooperative-sticky) is a sticky one; the broker then runs its
// "uniform" assignor.
func protocolOpts() []kgo.Opt {
	if groupProtocol() == protocolConsumer {
		return []kgo.Opt{kgo.ServerSideBalancer()}
	}
	return nil
}

// groupName gives each protocol its own groups, so that running the suite
// under both on one broker never meets a group of the other type.
func groupName(group string) string { return group + "-" + groupProtocol() }

// assertGroupProtocol fails unless the broker lists group, while it has
// members, as a group of the protocol the suite runs under: a client that
// silently fell back to the classic protocol fails here.
func assertGroupProtocol(t *testing.T, c *cluster, group string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := c.client(t)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, typ := range []string{protocolClassic, protocolConsumer} {
		listed, err := adm.ListGroupsByType(ctx, []string{typ})
		if err != nil {
			t.Fatalf("list %s groups: %v", typ, err)
		}
		_, found := listed[group]
		if want := typ == groupProtocol(); found != want {
			t.Fatalf("group %s listed as a %s group: %v, want %v", group, typ, found, want)
		}
	}
	t.Logf("group %s runs the %s protocol", group, groupProtocol())
}
