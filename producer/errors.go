package producer

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Errors New and a send can fail with. Callers branch on them with
// errors.Is; the returned error wraps the sentinel and adds context.
var (
	// ErrConfig is wrapped by every error New returns for a bad Config;
	// the message names the field.
	ErrConfig = errors.New("producer: bad config")
	// ErrEmptySession: the session ID is "".
	ErrEmptySession = errors.New("producer: empty session ID")
	// ErrNilValue: a nil value without Config.AllowNilValues.
	ErrNilValue = errors.New("producer: nil value (set AllowNilValues to send tombstones)")
	// ErrTooLarge: the message is larger than MaxMessageBytes or than the
	// broker accepts.
	ErrTooLarge = errors.New("producer: message too large")
	// ErrUnknownTopic: the topic does not exist (and the broker does not
	// create topics on demand). Ping's error wraps it too, naming the
	// missing topics.
	ErrUnknownTopic = errors.New("producer: unknown topic")
	// ErrClosed: the producer was closed before the message was delivered.
	ErrClosed = errors.New("producer: closed")
	// ErrBadEventID: WithEventID was given a malformed ID.
	ErrBadEventID = errors.New("producer: bad event ID")
	// ErrNoTopic: the send named no topic (WithTopic) and Config.Topic is
	// empty.
	ErrNoTopic = errors.New("producer: no topic: set Config.Topic or send WithTopic")
	// ErrTimeout: the message was not acknowledged within DeliveryTimeout.
	ErrTimeout = errors.New("producer: delivery timed out")
	// ErrUnreachable is wrapped by Ping's error when no broker answers;
	// the message names the brokers and the last error.
	ErrUnreachable = errors.New("producer: cannot reach brokers")
)

// classify maps a franz-go delivery error onto the sentinels above, keeping
// the original in the chain.
func classify(topic string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return fmt.Errorf("%w: topic %s: %w", ErrTooLarge, topic, err)
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return fmt.Errorf("%w: %s: %w", ErrUnknownTopic, topic, err)
	case errors.Is(err, kgo.ErrClientClosed):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	case errors.Is(err, kgo.ErrRecordTimeout):
		return fmt.Errorf("%w: topic %s: %w", ErrTimeout, topic, err)
	}
	return fmt.Errorf("producer: send to %s: %w", topic, err)
}
