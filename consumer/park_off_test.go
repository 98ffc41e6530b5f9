package consumer

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestParkOffWarning: a member with parking off whose group's commit
// holds a park position warns only when sessions may be parked: the park
// partition of T.park has entries past that position, or T.park is not
// the park topic the position is of (the group parked under a suffix of
// its own: the commit names another park topic's ID), or the end cannot
// be read (no park topic); each warning says what to do. With nothing
// past the position in the park topic it names, or in T.park when the
// commit names no ID (nothing parked), it does not warn. Either way the position stays in its commits.
func TestParkOffWarning(t *testing.T) {
	for _, tc := range []struct {
		name     string
		topics   []string
		entries  int    // records in chats.park/0 before the member starts
		idOf     string // the park topic whose ID the commit's park section names ("" for none)
		want     string // "" = no warning
		wantMore []string
	}{
		{"nothing parked", []string{"chats", "chats.park", "dlq"}, 1, "chats.park", "", nil},
		{"nothing parked, the commit naming no park topic ID (a broker that gives none)", []string{"chats", "chats.park", "dlq"}, 1, "", "", nil},
		{"entries past the position", []string{"chats", "chats.park", "dlq"}, 3, "chats.park",
			"has entries past the park position the group committed: sessions may be parked there",
			[]string{"Turn parking back on (Config.Park.Enabled)", "lanes park inspect --brokers ", " --group g-park-off --topic chats;",
				`"park_topic":"chats.park"`, `"park_position":1`, `"park_end":3`}},
		{"parked under the group's own suffix", []string{"chats", "chats.park", "chats.park-g", "dlq"}, 1, "chats.park-g",
			"holds a park position of another park topic than chats.park",
			[]string{"sessions may be parked there", "Turn parking back on", "lanes park inspect", "--suffix SUFFIX"}},
		{"no park topic", []string{"chats", "dlq"}, 0, "",
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
			section := ";park2:1,0,1,classic,," + topicIDOf(t, e, tc.idOf) // as a parking member's commit names its park topic
			parkWorld(t, e, "g-park-off", section, entries...)
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
			if pc := committedSection(t, e, "g-park-off"); pc.String() != section {
				t.Errorf("committed park section %q; want the one found, %q, kept", pc.String(), section)
			}
		})
	}
}

// topicIDOf is topic's ID as a park section writes it; "" for "".
func topicIDOf(t *testing.T, e *env, topic string) string {
	t.Helper()
	if topic == "" {
		return ""
	}
	tds, err := kadm.NewClient(e.client()).ListTopics(context.Background(), topic)
	if err != nil || tds[topic].Err != nil {
		t.Fatalf("list %s: %v %v", topic, err, tds[topic].Err)
	}
	return idOf(tds[topic])
}

// TestParkOffCheckAfterStart: the parking-off check's end-offset lookup
// comes after the start positions of an assignment, with a bound of its
// own: a park topic whose offsets are slow to list (the embedded broker
// answers each listing of it 3 s late, past CommitTimeout) does not keep
// a fresh StartLatest partition's start position from being read and
// committed (before, the lookup took the assignment's whole CommitTimeout
// and the fresh partition's position was never committed: its next owner
// would reset and skip what was produced meanwhile).
func TestParkOffCheckAfterStart(t *testing.T) {
	e := newEnv(t, 2, "chats", "chats.park", "dlq")
	e.produce("chats", []string{"a", "b", "c", "d", "e", "f"}, 5)
	parkWorld(t, e, "g-slow", ";park2:1,0,1,classic,,"+topicIDOf(t, e, "chats.park")) // chats/0 committed, chats/1 fresh
	var held atomic.Int64
	e.c.ControlKey(int16(kmsg.ListOffsets), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		for _, rt := range kreq.(*kmsg.ListOffsetsRequest).Topics {
			if rt.Topic == "chats.park" {
				held.Add(1)
				e.sleepFor(3 * time.Second) // a slow broker, not a wait for the test

			}
		}
		return nil, nil, false
	})
	cfg := e.config("g-slow", "chats")
	cfg.StartOffset = StartLatest
	cfg.CommitTimeout = 2 * time.Second
	c, err := New(cfg, HandlerFunc(func(context.Context, *Message) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	adm := kadm.NewClient(e.client())
	ends, err := adm.ListEndOffsets(context.Background(), "chats")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup("chats", 1)
	var got kadm.OffsetResponse
	waitFor(t, "the fresh partition's start position committed while the park topic's offsets list slowly", func() bool {
		resps, err := adm.FetchOffsets(context.Background(), "g-slow")
		if err != nil {
			return false
		}
		got, _ = resps.Lookup("chats", 1)
		return got.At == end.Offset
	}, func() string {
		return fmt.Sprintf("chats/1 committed at %d (err %v), its end %d", got.At, got.Err, end.Offset)
	})
	// The check runs after the start positions, so on a busy machine it may
	// list the park topic's offsets only after the commit above.
	waitFor(t, "the park topic's offsets listed: the check this test slows ran", func() bool { return held.Load() > 0 },
		func() string { return "never listed" })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
