package consumer

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestStatsJSON: snake_case names, durations as duration strings, empty
// lists as [], and what is written reads back as it was.
func TestStatsJSON(t *testing.T) {
	opened := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	st := Stats{
		Partitions: []PartitionStats{{
			Topic: "chats", Partition: 3, Watermark: 7, HeldAt: 7, HeldBySession: "a",
			WatermarkAge: 1500 * time.Millisecond, StalledFor: 1200 * time.Millisecond, CommitFailingFor: 2 * time.Second,
			DeadLetterBlockedFor: time.Minute,
		}},
		DeadLetteredByReason: map[Reason]int64{ReasonPermanent: 2},
		HotSessions:          []SessionStats{{Session: "a", Depth: 3, Running: true, RunningFor: 250 * time.Millisecond}},
		CommitLatency:        3 * time.Millisecond,
		WorkHeld:             "breaker open",
		Breaker:              BreakerStats{Enabled: true, Open: true, OpenedAt: opened, Calls: 10, Failures: 9},
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"commit_latency":"3ms"`, `"watermark_age":"1.5s"`, `"stalled_for":"1.2s"`, `"work_held":"breaker open"`, `"commit_failing_for":"2s"`,
		`"dead_letter_blocked_for":"1m0s"`, `"running_for":"250ms"`, `"held_by_session":"a"`,
		`"dead_lettered_by_reason":{"permanent":2}`, `"opened_at":"2026-12-01T10:00:00Z"`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s:\n%s", want, b)
		}
	}
	if strings.Count(string(b), `"commit_latency"`) != 1 || strings.Contains(string(b), "CommitLatency") {
		t.Errorf("a field written twice or under its Go name:\n%s", b)
	}
	var back Stats
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, st) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, st)
	}
	if err := json.Unmarshal([]byte(`{"commit_latency":"soon"}`), &back); err == nil || !strings.Contains(err.Error(), "commit_latency") {
		t.Errorf("bad duration: %v, want an error naming commit_latency", err)
	}
}

// TestStatsJSONEmpty: a consumer that owns nothing reports [] and {}, not
// null, and a breaker that never opened has no opening time.
func TestStatsJSONEmpty(t *testing.T) {
	c := unstarted(t, nil)
	b, err := json.Marshal(struct {
		Health Health `json:"health"`
		Stats  Stats  `json:"stats"`
	}{c.Health(), c.Stats()})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"partitions":[]`, `"hot_sessions":[]`, `"dead_lettered_by_reason":{}`, `"opened_at":null`, `"reasons":["not running`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s:\n%s", want, b)
		}
	}
}
