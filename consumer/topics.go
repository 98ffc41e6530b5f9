package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicWatch knows which of the consumed topics, the dead-letter topic and
// the park topics the brokers said do not exist, as of the latest check.
type topicWatch struct {
	consumed []string // Config.Topics
	dlq      string   // Config.DeadLetterTopic; "" without one
	park     []string // the park topics, with Config.Park (parkTopics)
	log      *zerolog.Logger

	mu           sync.Mutex
	missing      []string // consumed topics missing
	missingSince time.Time
	dlqMissing   bool
	dlqSince     time.Time
	parkMissing  []string // park topics missing
	parkSince    time.Time

	ids *idWatch // the topic IDs read under, and topics made again (topics_recreated.go)
}

func newTopicWatch(cfg *Config) *topicWatch {
	return &topicWatch{consumed: cfg.Topics, dlq: cfg.DeadLetterTopic, park: parkTopics(cfg), log: cfg.Logger,
		ids: newIDWatch(cfg.Topics, cfg.DeadLetterTopic)}
}

// all returns every topic the consumer needs: the consumed ones, the
// dead-letter topic and the park topics.
func (w *topicWatch) all() []string {
	out := slices.Clone(w.consumed)
	if w.dlq != "" {
		out = append(out, w.dlq)
	}
	return append(out, w.park...)
}

// update takes a check's answer: the topics missing among all(). It warns
// when a topic goes missing and says so at info when it exists again.
func (w *topicWatch) update(missing []string, now time.Time) {
	var consumed, park []string
	dlq := false
	for _, t := range missing {
		switch {
		case t == w.dlq:
			dlq = true
		case slices.Contains(w.park, t):
			park = append(park, t)
		default:
			consumed = append(consumed, t)
		}
	}
	w.updatePark(park, now)
	w.mu.Lock()
	was, wasDLQ := w.missing, w.dlqMissing
	if len(consumed) > 0 && len(was) == 0 {
		w.missingSince = now
	}
	if dlq && !wasDLQ {
		w.dlqSince = now
	}
	w.missing, w.dlqMissing = consumed, dlq
	w.mu.Unlock()

	if gone := minus(consumed, was); len(gone) > 0 {
		w.log.Warn().Strs("topics", gone).
			Msg("consumed topics missing: this member gets none of their partitions; create them or fix Config.Topics")
	}
	if dlq && !wasDLQ {
		w.log.Warn().Strs("topics", []string{w.dlq}).
			Msg("dead-letter topic missing: a record that fails holds its partition until the topic exists; create it or fix Config.DeadLetterTopic")
	}
	found := minus(was, consumed)
	if wasDLQ && !dlq {
		found = append(found, w.dlq)
	}
	if len(found) > 0 {
		w.log.Info().Strs("topics", found).Msg("topics found: they exist now")
	}
}

// minus returns the elements of a not in b.
func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func (w *topicWatch) anyMissing() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.missing) > 0 || w.dlqMissing || len(w.parkMissing) > 0
}

// reasons are the readiness reasons about missing topics.
func (w *topicWatch) reasons() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	if len(w.missing) > 0 {
		out = append(out, fmt.Sprintf("consumed topics missing since %s: %v: this member gets none of their partitions; create them or fix Config.Topics",
			w.missingSince.UTC().Format(time.RFC3339), w.missing))
	}
	if w.dlqMissing {
		out = append(out, fmt.Sprintf("dead-letter topic missing since %s: [%s]: a record that fails holds its partition until it exists; create it or fix Config.DeadLetterTopic",
			w.dlqSince.UTC().Format(time.RFC3339), w.dlq))
	}
	if len(w.parkMissing) > 0 {
		out = append(out, parkMissingReason(w.parkMissing, w.parkSince))
	}
	return append(out, w.ids.reasons()...)
}

// missingTopics asks the brokers (a metadata request of its own, not the
// client's cache, and never creating a topic) which of topics do not
// exist. Another error of a topic (not authorized) fails the check.
func missingTopics(ctx context.Context, cl *kgo.Client, topics []string) ([]string, error) {
	missing, _, _, err := topicState(ctx, cl, topics)
	return missing, err
}

// topicState is missingTopics that also returns the topic ID of each topic
// that exists (absent when the brokers give none: before Kafka 2.8).
func topicState(ctx context.Context, cl *kgo.Client, topics []string) (missing []string, ids map[string]topicID, counts map[string]int, err error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, nil, nil, err
	}
	answered := map[string]bool{}
	ids = map[string]topicID{}
	counts = map[string]int{}
	var errs []error
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		answered[*t.Topic] = true
		switch err := kerr.ErrorForCode(t.ErrorCode); {
		case err == nil:
			if t.TopicID != (topicID{}) {
				ids[*t.Topic] = t.TopicID
			}
			counts[*t.Topic] = len(t.Partitions)
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			missing = append(missing, *t.Topic)
		default:
			errs = append(errs, fmt.Errorf("topic %s: %w", *t.Topic, err))
		}
	}
	for _, t := range topics {
		if !answered[t] {
			missing = append(missing, t)
		}
	}
	if len(errs) > 0 {
		return nil, nil, nil, errors.Join(errs...)
	}
	return missing, ids, counts, nil
}

// parkTopics are the park topics of cfg's consumed topics; none without
// parking. cfg.Park has its defaults.
func parkTopics(cfg *Config) []string {
	if !cfg.Park.Enabled {
		return nil
	}
	out := make([]string, len(cfg.Topics))
	for i, t := range cfg.Topics {
		out[i] = t + cfg.Park.TopicSuffix
	}
	return out
}

// updatePark takes the park topics a check found missing: it warns when
// one goes missing and says so at info when it exists again.
func (w *topicWatch) updatePark(missing []string, now time.Time) {
	w.mu.Lock()
	was := w.parkMissing
	if len(missing) > 0 && len(was) == 0 {
		w.parkSince = now
	}
	w.parkMissing = missing
	w.mu.Unlock()
	if gone := minus(missing, was); len(gone) > 0 {
		w.log.Warn().Strs("topics", gone).
			Msg("park topics missing: a partition they serve is held at its assignment (nothing of it is handled), and one already owned holds a record it must park until its park topic exists; create them with their source topic's partition count and cleanup.policy=delete, or fix Config.Park.TopicSuffix")
	}
	if found := minus(was, missing); len(found) > 0 {
		w.log.Info().Strs("topics", found).Msg("topics found: they exist now")
	}
}

// parkMissingReason is the readiness reason about park topics missing
// since since.
func parkMissingReason(missing []string, since time.Time) string {
	return fmt.Sprintf("park topics missing since %s: %v: a partition they serve is held at its assignment, and one already owned holds a record it must park; create them with their source topic's partition count and cleanup.policy=delete, or fix Config.Park.TopicSuffix",
		since.UTC().Format(time.RFC3339), missing)
}
