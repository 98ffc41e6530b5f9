package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lanesdev/lanes/lanestest"
	"github.com/twmb/franz-go/pkg/kadm"
)

// CreateTopics creates topics (replication factor 1, so that a single-node
// cluster can hold them) on the cluster b talks to, waiting at most
// timeout. Its error names the brokers, the topics and, when they did not
// answer, what to check.
func CreateTopics(ctx context.Context, b *lanestest.Broker, timeout time.Duration, partitions int32, topics ...string) error {
	brokers := strings.Join(b.Addrs(), ",")
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := b.Client()
	if err != nil {
		return fmt.Errorf("brokers %s: %w", brokers, err)
	}
	defer cl.Close()
	resps, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 1, nil, topics...)
	if err == nil {
		err = resps.Error()
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("brokers %s did not answer within %v while creating topics %s: check that they are up and reachable (and the --tls/--sasl flags): %w",
			brokers, timeout, strings.Join(topics, ", "), err)
	case err != nil:
		return fmt.Errorf("brokers %s: create topics %s: %w", brokers, strings.Join(topics, ", "), err)
	}
	return nil
}
