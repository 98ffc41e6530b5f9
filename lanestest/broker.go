package lanestest

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Broker is the Kafka cluster a test runs on: an embedded kfake broker in
// the test's own process ([NewBroker]) or a running cluster such as a real
// Apache Kafka ([ConnectBroker]).
type Broker struct {
	addrs   []string
	opts    []kgo.Opt      // for every client: TLS, SASL (a connected cluster)
	cluster *kfake.Cluster // nil for a connected cluster
}

// NewBroker starts an embedded single-node broker on a free loopback port
// with the given topics, each with partitions partitions. Close stops it.
func NewBroker(partitions int32, topics ...string) (*Broker, error) {
	opts := []kfake.Opt{kfake.NumBrokers(1)}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(partitions, topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("lanestest: start embedded broker: %w", err)
	}
	return &Broker{addrs: c.ListenAddrs(), cluster: c}, nil
}

// ConnectBroker uses a running cluster at addrs. Close does not stop it.
// opts (TLS, SASL) apply to every client the Broker makes; Opts returns
// them for the producer's and consumer's ClientOptions.
func ConnectBroker(addrs []string, opts ...kgo.Opt) *Broker {
	return &Broker{addrs: append([]string(nil), addrs...), opts: append([]kgo.Opt(nil), opts...)}
}

// Opts returns the client options given to ConnectBroker (nil for an
// embedded broker).
func (b *Broker) Opts() []kgo.Opt { return append([]kgo.Opt(nil), b.opts...) }

// Addrs returns the seed brokers, for producer.Config and consumer.Config.
func (b *Broker) Addrs() []string { return append([]string(nil), b.addrs...) }

// Embedded reports whether the broker runs in this process (kfake).
func (b *Broker) Embedded() bool { return b.cluster != nil }

// Fake returns the embedded kfake cluster (nil for a connected cluster):
// a test injects faults through its ControlKey, or makes it answer as
// Kafka does where kfake does not. kfake has no tagged version: its API
// changes with the version lanestest is built with, outside lanestest's
// own compatibility. A control function in kfake's SleepControl when the
// broker closes can deadlock kfake and leak its goroutines: wake every
// sleep, and let its control function return, before Close.
func (b *Broker) Fake() *kfake.Cluster { return b.cluster }

// Client returns a franz-go client seeded with the broker's addresses, with
// the options given to ConnectBroker and then opts; the caller closes it.
func (b *Broker) Client(opts ...kgo.Opt) (*kgo.Client, error) {
	all := append([]kgo.Opt{kgo.SeedBrokers(b.addrs...)}, b.opts...)
	return kgo.NewClient(append(all, opts...)...)
}

// CreateTopics creates topics with the given partitions (replication factor
// 1, so a single-node cluster can hold them).
func (b *Broker) CreateTopics(ctx context.Context, partitions int32, topics ...string) error {
	cl, err := b.Client()
	if err != nil {
		return err
	}
	defer cl.Close()
	resps, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 1, nil, topics...)
	if err != nil {
		return fmt.Errorf("lanestest: create topics %v: %w", topics, err)
	}
	if err := resps.Error(); err != nil {
		return fmt.Errorf("lanestest: create topics %v: %w", topics, err)
	}
	return nil
}

// DeleteTopics deletes topics.
func (b *Broker) DeleteTopics(ctx context.Context, topics ...string) error {
	cl, err := b.Client()
	if err != nil {
		return err
	}
	defer cl.Close()
	resps, err := kadm.NewClient(cl).DeleteTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("lanestest: delete topics %v: %w", topics, err)
	}
	return resps.Error()
}

// Close stops an embedded broker; for a connected cluster it does nothing.
func (b *Broker) Close() {
	if b.cluster != nil {
		b.cluster.Close()
	}
}
