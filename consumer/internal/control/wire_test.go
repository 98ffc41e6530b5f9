package control

import (
	"errors"
	"testing"
	"time"
)

// TestWireRoundTrip: an entry reads back as written, a session with NUL
// bytes and a tombstone too; what another writer put in the topic is
// refused as ErrNotControl.
func TestWireRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 5, 1, 2, 3, 0, time.UTC)
	for _, tc := range []struct {
		k Key
		s Setting
	}{
		{Key{"chats", "chat-1"}, Setting{Paused: true, By: "ops@host", At: at, Reason: "moderation", TopicID: "abc"}},
		{Key{"chats", "a\x00b"}, Setting{Rate: 2.5, Burst: 3, At: at}},
		{Key{"chats", "gone"}, Setting{}},
	} {
		key, value, err := Encode("g", tc.k, tc.s)
		if err != nil {
			t.Fatal(err)
		}
		if tc.s.Empty() != (value == nil) {
			t.Fatalf("%+v: value %q; a setting that controls nothing is a tombstone", tc.s, value)
		}
		group, k, s, err := Decode(key, value)
		if err != nil || group != "g" || k != tc.k || s != tc.s {
			t.Fatalf("Decode(Encode(%+v, %+v)) = %q %+v %+v %v", tc.k, tc.s, group, k, s, err)
		}
	}
	for _, bad := range []struct{ key, value string }{
		{"someone-else\x00g\x00t\x00s", `{}`},
		{"lanes-control1\x00g\x00t", `{}`},
		{"lanes-control1\x00g\x00t\x00s", `not json`},
		{"lanes-control1\x00g\x00t\x00s", `{"rate":-1}`},
	} {
		if _, _, _, err := Decode([]byte(bad.key), []byte(bad.value)); !errors.Is(err, ErrNotControl) {
			t.Errorf("Decode(%q, %q): %v; want ErrNotControl", bad.key, bad.value, err)
		}
	}
}
