package eventid

import "github.com/twmb/franz-go/pkg/kgo"

// Header names lanes writes on every record it produces.
const (
	// HeaderEventID carries the event ID (canonical UUID string).
	HeaderEventID = "lanes-event-id"
	// HeaderSessionID carries the session ID (also the record key).
	HeaderSessionID = "lanes-session-id"
)

// Header returns the value of the first header named key, and whether it
// was present.
func Header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// SetHeader sets header key to value, replacing every existing header of
// that name, so a record never carries two event IDs.
func SetHeader(r *kgo.Record, key, value string) {
	out := r.Headers[:0]
	for _, h := range r.Headers {
		if h.Key != key {
			out = append(out, h)
		}
	}
	r.Headers = append(out, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

// FromRecord returns the record's event ID, "" when the header is absent.
// It does not validate the value; use [Parse] for that.
func FromRecord(r *kgo.Record) string {
	v, _ := Header(r, HeaderEventID)
	return v
}

// SessionFromRecord returns the record's lanes-session-id header, "" when
// absent.
func SessionFromRecord(r *kgo.Record) string {
	v, _ := Header(r, HeaderSessionID)
	return v
}

// Stamp writes id and session into the record's lanes headers.
func Stamp(r *kgo.Record, id, session string) {
	SetHeader(r, HeaderEventID, id)
	SetHeader(r, HeaderSessionID, session)
}
