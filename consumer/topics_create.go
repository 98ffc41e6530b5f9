package consumer

import (
	"fmt"
	"strings"
)

// TopicKind is what a topic is to a consumer ([CreateTopics],
// [CheckTopics]).
type TopicKind string

const (
	// TopicConsumed is one of Config.Topics.
	TopicConsumed TopicKind = "consumed"
	// TopicDeadLetter is Config.DeadLetterTopic.
	TopicDeadLetter TopicKind = "dead-letter"
	// TopicPark is the park topic of a consumed topic (Config.Park).
	TopicPark TopicKind = "park"
	// TopicControl is the control topic (Config.Control): one partition,
	// compacted.
	TopicControl TopicKind = "control"
)

// TopicState is what [CreateTopics] or [CheckTopics] found, or did, for a
// topic.
type TopicState string

const (
	// TopicOK: it exists and fits its use.
	TopicOK TopicState = "ok"
	// TopicCreated: CreateTopics created it.
	TopicCreated TopicState = "created"
	// TopicWouldCreate: it is missing and, with TopicsDryRun, the brokers
	// accepted its creation as valid without creating it.
	TopicWouldCreate TopicState = "would create"
	// TopicMissing: it does not exist and was not created; Err says why
	// and what to do.
	TopicMissing TopicState = "missing"
	// TopicWrong: it exists but does not fit its use; Err says what is
	// wrong and how to fix it.
	TopicWrong TopicState = "wrong"
)

// TopicResult is one topic as [CreateTopics] or [CheckTopics] left it.
type TopicResult struct {
	Topic string
	Kind  TopicKind
	// Source is the consumed topic a park topic belongs with; "" for the
	// others.
	Source string
	State  TopicState
	// Partitions is its partition count: what it has, or was (would be)
	// created with; -1 for the brokers' default (num.partitions), 0 when
	// unknown (missing).
	Partitions int32
	// ReplicationFactor is its number of replicas, as it has them or was
	// created with; -1 for the brokers' default
	// (default.replication.factor), 0 when unknown.
	ReplicationFactor int16
	// CleanupPolicy is the cleanup.policy of a dead-letter or park topic,
	// as read back or set; "" for a consumed topic.
	CleanupPolicy string
	// Err, for a missing or wrong topic, names the topic, says what is
	// wrong and how to fix it; it wraps ErrTopicMissing or ErrTopicUnfit.
	Err error
}

// String is the result on one line: its state, then what it is and its
// partitions, replicas and policy, or what is wrong with it.
func (r TopicResult) String() string {
	if r.Err != nil {
		return fmt.Sprintf("%-12s %v", r.State, r.Err)
	}
	parts := []string{partitionsText(r.Partitions)}
	switch {
	case r.ReplicationFactor < 0:
		parts = append(parts, "the brokers' default replication factor")
	case r.ReplicationFactor > 0:
		parts = append(parts, fmt.Sprintf("replication factor %d", r.ReplicationFactor))
	}
	if r.CleanupPolicy != "" {
		parts = append(parts, "cleanup.policy="+r.CleanupPolicy)
	}
	return fmt.Sprintf("%-12s %s: %s", r.State, r.label(), strings.Join(parts, ", "))
}

// label names the topic with its kind: "park topic chat.park (of chat)".
func (r TopicResult) label() string {
	switch r.Kind {
	case TopicPark:
		return fmt.Sprintf("park topic %s (of %s)", r.Topic, r.Source)
	case TopicDeadLetter:
		return "dead-letter topic " + r.Topic
	case TopicControl:
		return "control topic " + r.Topic
	}
	return "consumed topic " + r.Topic
}

// partitionsText is "1 partition", "6 partitions", or for -1 the brokers'
// default.
func partitionsText(n int32) string {
	switch {
	case n < 0:
		return "the brokers' default partition count"
	case n == 1:
		return "1 partition"
	}
	return fmt.Sprintf("%d partitions", n)
}

// topicError is a TopicResult's Err: its own message, wrapping a sentinel.
type topicError struct {
	kind error // ErrTopicMissing or ErrTopicUnfit
	msg  string
}

func (e *topicError) Error() string { return e.msg }
func (e *topicError) Unwrap() error { return e.kind }

// TopicOption adjusts [CreateTopics] and [CheckTopics].
type TopicOption func(*topicOptions)

type topicOptions struct {
	replication   int16 // -1: the brokers' default
	dlqPartitions int32 // 0: the most partitions of a consumed topic
	consumed      int32 // 0: do not create consumed topics
	dryRun        bool
	err           error
}

func (o *topicOptions) bad(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
}

// TopicsReplicationFactor creates topics with n replicas of each
// partition. Default: -1, the brokers' default.replication.factor.
func TopicsReplicationFactor(n int16) TopicOption {
	return func(o *topicOptions) {
		if n == 0 || n < -1 {
			o.bad("TopicsReplicationFactor: %d: want 1 or more, or -1 for the brokers' default", n)
		}
		o.replication = n
	}
}

// TopicsDeadLetterPartitions creates the dead-letter topic with n
// partitions. Default: as many as the consumed topic with the most, or the
// brokers' num.partitions when no consumed topic exists. The dead-letter
// topic takes the dead letters of every consumed topic, each keyed as its
// record was (so a session's dead letters stay in order in one
// partition); as many partitions as the widest source lets whatever reads
// it back spread as wide as the consumer does. Choose the count once:
// adding partitions later moves keys to other partitions.
func TopicsDeadLetterPartitions(n int32) TopicOption {
	return func(o *topicOptions) {
		if n <= 0 {
			o.bad("TopicsDeadLetterPartitions: %d: want 1 or more", n)
		}
		o.dlqPartitions = n
	}
}

// TopicsCreateConsumed makes CreateTopics create a missing consumed topic
// with the given partitions (and the brokers' default policy). Default: a
// consumed topic is never created, only reported missing: its partition
// count caps the group's members and its keys' partitions, a decision
// better made on purpose.
func TopicsCreateConsumed(partitions int32) TopicOption {
	return func(o *topicOptions) {
		if partitions <= 0 {
			o.bad("TopicsCreateConsumed: %d partitions: want 1 or more", partitions)
		}
		o.consumed = partitions
	}
}

// TopicsDryRun makes CreateTopics create nothing: the brokers only validate
// each creation (the request's ValidateOnly), and a topic that would be
// created is TopicWouldCreate.
func TopicsDryRun() TopicOption {
	return func(o *topicOptions) { o.dryRun = true }
}
