package consumer

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Ping checks that a broker answers and that every consumed topic, the
// dead-letter topic and, with Config.Park, every park topic exist, so a
// service can fail fast, or report, at
// start. It works before Run (and while it runs) with a short-lived client
// of its own, made from Brokers and ClientOptions like Run's. It returns
// nil, an error wrapping ErrUnreachable naming the brokers and the last
// error when none answers, one wrapping ErrTopicMissing naming the missing
// topics, or the error of the metadata request (a topic not authorized).
// ctx bounds it; without a deadline a broker that accepts connections but
// never answers holds it for franz-go's request timeouts.
func (c *Consumer) Ping(ctx context.Context) error {
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(c.cfg.Brokers...),
		kgo.WithLogger(newKgoLogger(c.log(), "ping")),
	}, c.cfg.ClientOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("consumer: ping: start client: %w", err)
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		return fmt.Errorf("%w: none of %v answered: %w", ErrUnreachable, c.cfg.Brokers, err)
	}
	topics := newTopicWatch(&c.cfg).all()
	missing, err := missingTopics(ctx, cl, topics)
	if err != nil {
		return fmt.Errorf("consumer: ping: topic metadata from %v: %w", c.cfg.Brokers, err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s (brokers %v); create them or fix Config.Topics / Config.DeadLetterTopic / Config.Park.TopicSuffix",
			ErrTopicMissing, strings.Join(missing, ", "), c.cfg.Brokers)
	}
	return nil
}
