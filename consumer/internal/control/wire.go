package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Key names one session of one consumed topic, for one group.
type Key struct {
	Topic, Session string
}

// Setting is what an operator set for one session: paused, or limited to
// Rate records per second with bursts of Burst, and who set it, when and
// why (shown by lanes session list and in Health).
type Setting struct {
	Paused bool    `json:"paused,omitempty"`
	Rate   float64 `json:"rate,omitempty"`  // records per second; 0: no limit
	Burst  int     `json:"burst,omitempty"` // 0 with a Rate: 1
	// By names who wrote it (user@host, or what the caller said), At when,
	// Reason why; TopicID is the consumed topic's ID when it was written
	// (a topic made again since has another).
	By      string    `json:"by,omitempty"`
	At      time.Time `json:"at"`
	Reason  string    `json:"reason,omitempty"`
	TopicID string    `json:"topic_id,omitempty"`
}

// Empty reports whether s controls nothing: its entry is a tombstone.
func (s Setting) Empty() bool { return !s.Paused && s.Rate == 0 }

// keyMark starts every key of the control topic: its format's version.
const keyMark = "lanes-control1"

// ErrNotControl: a control topic record that is not an entry of this
// format (written by something else).
var ErrNotControl = errors.New("not a lanes control entry")

// Encode is the control topic record of group's setting s of k: its key,
// and its value (nil, a tombstone, when s is empty: compaction then drops
// the session's earlier entries).
func Encode(group string, k Key, s Setting) (key, value []byte, err error) {
	key = fmt.Appendf(nil, "%s\x00%s\x00%s\x00%s", keyMark, group, k.Topic, k.Session)
	if s.Empty() {
		return key, nil, nil
	}
	if value, err = json.Marshal(s); err != nil {
		return nil, nil, fmt.Errorf("control: encode the setting of session %q of %s: %w", k.Session, k.Topic, err)
	}
	return key, value, nil
}

// Decode reads a control topic record back: the group it is for, the
// session, and its setting (empty for a tombstone).
func Decode(key, value []byte) (group string, k Key, s Setting, err error) {
	parts := bytes.SplitN(key, []byte{0}, 4)
	if len(parts) != 4 || string(parts[0]) != keyMark {
		return "", Key{}, Setting{}, fmt.Errorf("%w: key %q", ErrNotControl, clipKey(key))
	}
	group, k = string(parts[1]), Key{Topic: string(parts[2]), Session: string(parts[3])}
	if value == nil {
		return group, k, Setting{}, nil
	}
	if err := json.Unmarshal(value, &s); err != nil {
		return "", Key{}, Setting{}, fmt.Errorf("%w: the value of session %q of %s: %v", ErrNotControl, k.Session, k.Topic, err)
	}
	if s.Rate < 0 || s.Burst < 0 {
		return "", Key{}, Setting{}, fmt.Errorf("%w: session %q of %s: negative rate %v or burst %d", ErrNotControl, k.Session, k.Topic, s.Rate, s.Burst)
	}
	return group, k, s, nil
}

func clipKey(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
