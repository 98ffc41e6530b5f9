package producer

import (
	"fmt"

	"github.com/lanesdev/lanes/eventid"
	"github.com/twmb/franz-go/pkg/kgo"
)

// SendOption adjusts one send.
type SendOption func(*sendOpts)

type sendOpts struct {
	topic    string
	topicSet bool // WithTopic was given (an empty topic is an error)
	eventID  string
	idSet    bool // WithEventID was given (an empty ID is an error)
	seq      uint64
	hasSeq   bool
	headers  []kgo.RecordHeader
}

// WithTopic sends the message to topic instead of Config.Topic. The
// session is the record key and is hashed as for any topic, so a session's
// messages to one topic keep their order; messages of one session to two
// topics are two streams, ordered each on its own. An empty topic fails
// the send with ErrNoTopic.
func WithTopic(topic string) SendOption {
	return func(o *sendOpts) { o.topic, o.topicSet = topic, true }
}

// WithEventID sets the message's event ID instead of a new UUIDv7. It must
// be a canonical UUID (eventid.Parse); otherwise, an empty ID too, the
// send fails with ErrBadEventID. Use it when the caller already has an
// idempotency key.
func WithEventID(id string) SendOption { return func(o *sendOpts) { o.eventID, o.idSet = id, true } }

// WithSequence derives the event ID from the session and seq
// (eventid.ForSequence): resending message seq of a session produces the
// same ID, so consumers can deduplicate. WithEventID takes precedence.
func WithSequence(seq uint64) SendOption {
	return func(o *sendOpts) { o.seq, o.hasSeq = seq, true }
}

// WithHeader adds a header to the message. The lanes-* headers are set by
// the producer and cannot be overridden.
func WithHeader(key string, value []byte) SendOption {
	return func(o *sendOpts) { o.headers = append(o.headers, kgo.RecordHeader{Key: key, Value: value}) }
}

func (o *sendOpts) resolveEventID(session string) (string, error) {
	switch {
	case o.idSet:
		id, err := eventid.Parse(o.eventID)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrBadEventID, err)
		}
		return id, nil
	case o.hasSeq:
		return eventid.ForSequence(session, o.seq), nil
	}
	return eventid.New(), nil
}
