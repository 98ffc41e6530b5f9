package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Ping checks that a broker answers and that Config.Topic (when set) and
// topics, the ones the service sends to WithTopic, exist, so a service can
// fail fast, or report, at start instead of learning it from sends that
// time out after DeliveryTimeout. It uses the producer's client, so it
// also opens its first connection. It returns nil, an error wrapping
// ErrUnreachable naming the brokers and the last error when none answers,
// one wrapping ErrUnknownTopic naming the missing topics, one wrapping
// ErrClosed after Close, or the error of the metadata request (a topic not
// authorized). ctx bounds it; without a deadline a broker that accepts
// connections but never answers holds it for franz-go's request timeouts.
func (p *Producer) Ping(ctx context.Context, topics ...string) error {
	p.mu.RLock()
	closed := p.closed
	p.mu.RUnlock()
	if closed {
		return fmt.Errorf("producer: ping: %w", ErrClosed)
	}
	if err := p.cl.Ping(ctx); err != nil {
		return fmt.Errorf("%w: none of %v answered: %w", ErrUnreachable, p.cfg.Brokers, err)
	}
	var want []string
	for _, t := range append([]string{p.cfg.Topic}, topics...) {
		if t != "" && !slices.Contains(want, t) {
			want = append(want, t)
		}
	}
	if len(want) == 0 {
		return nil
	}
	missing, err := missingTopics(ctx, p.cl, want)
	if err != nil {
		return fmt.Errorf("producer: ping: topic metadata from %v: %w", p.cfg.Brokers, err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s (brokers %v); create them, or fix Config.Topic or the topics sent WithTopic",
			ErrUnknownTopic, strings.Join(missing, ", "), p.cfg.Brokers)
	}
	return nil
}

// missingTopics asks a broker for the topics' metadata, without creating
// them, and returns those that do not exist, in the order given.
func missingTopics(ctx context.Context, cl *kgo.Client, topics []string) ([]string, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	found := map[string]bool{}
	var errs []error
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		switch err := kerr.ErrorForCode(t.ErrorCode); {
		case err == nil:
			found[*t.Topic] = true
		case !errors.Is(err, kerr.UnknownTopicOrPartition):
			found[*t.Topic] = true // there, but not usable: said below
			errs = append(errs, fmt.Errorf("topic %s: %w", *t.Topic, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var missing []string
	for _, t := range topics {
		if !found[t] {
			missing = append(missing, t)
		}
	}
	return missing, nil
}
