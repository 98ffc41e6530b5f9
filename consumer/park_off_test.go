package consumer

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestParkOffWarning: a member with parking off whose group's commit
// holds a park position warns only when the park partition has entries
// past that position (sessions may be parked there), saying what to do;
// with nothing past it (nothing parked) it does not warn. When the park
// partition's end cannot be read (no park topic under the suffix it
// knows), it warns that sessions may be parked. Either way the position
// stays in its commits.
func TestParkOffWarning(t *testing.T) {
	for _, tc := range []struct {
		name     string
		topics   []string
		entries  int    // records in chats.park/0 before the member starts
		section  string // the park section of the group's commit of chats/0
		want     string // "" = no warning
		wantMore []string
	}{
		{"nothing parked", []string{"chats", "chats.park", "dlq"}, 1, ";park2:1,0,1,classic,,", "", nil},
		{"entries past the position", []string{"chats", "chats.park", "dlq"}, 3, ";park2:1,0,1,classic,,",
			"has entries past the park position the group committed: sessions may be parked there",
			[]string{"Turn parking back on (Config.Park.Enabled)", "lanes park inspect --brokers ", " --group g-park-off --topic chats;",
				`"park_topic":"chats.park"`, `"park_position":1`, `"park_end":3`}},
		{"no park topic", []string{"chats", "dlq"}, 0, ";park2:1,0,1,classic,,",
			"the park partition's end could not be read", []string{"sessions may be parked there", "Turn parking back on (Config.Park.Enabled)", "lanes park inspect"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1, tc.topics...)
			entries := make([]func(*parkIO) *kgo.Record, tc.entries)
			for i := range entries {
				entries[i] = func(*parkIO) *kgo.Record {
					return &kgo.Record{Topic: "chats.park", Partition: 0, Value: []byte("an entry")}
				}
			}
			parkWorld(t, e, "g-park-off", tc.section, entries...)
			e.produce("chats", []string{"s"}, 1)
			var logs syncBuffer
			lg := zerolog.New(&logs)
			cfg := e.config("g-park-off", "chats")
			cfg.Logger = &lg
			rec := newRecorder(1, nil)
			c, err := New(cfg, rec)
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, c)
			rec.wait(t) // handled: its partition's assignment, and the warning, came first
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			var warned []string
			for _, l := range bytes.Split(logs.Bytes(), []byte("\n")) {
				if bytes.Contains(l, []byte("parking is off")) && bytes.Contains(l, []byte(`"level":"warn"`)) {
					warned = append(warned, string(l))
				}
			}
			switch {
			case tc.want == "" && len(warned) > 0:
				t.Fatalf("nothing parked, yet warned: %s", warned)
			case tc.want != "" && len(warned) != 1:
				t.Fatalf("warned %d times, want once: %s", len(warned), warned)
			case tc.want != "":
				for _, w := range append([]string{tc.want}, tc.wantMore...) {
					if !strings.Contains(warned[0], w) {
						t.Errorf("warning %s\nwant it to contain %q", warned[0], w)
					}
				}
			}
			if pc := committedSection(t, e, "g-park-off"); pc.String() != tc.section {
				t.Errorf("committed park section %q; want the one found, %q, kept", pc.String(), tc.section)
			}
		})
	}
}
