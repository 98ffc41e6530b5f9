package consumer

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// JSON: the stats types marshal with snake_case names (their struct tags),
// durations as Go duration strings ("1.5s", "250ms") so that debug/lanes
// reads as it would be written, and empty lists as [] (Stats never holds
// nil slices or maps). The Go fields keep their types, and what MarshalJSON
// writes UnmarshalJSON reads back.

// MarshalJSON writes s with CommitLatency as a duration string.
func (s Stats) MarshalJSON() ([]byte, error) {
	type plain Stats
	return json.Marshal(struct {
		plain
		CommitLatency string `json:"commit_latency"`
	}{plain(s), s.CommitLatency.String()})
}

// MarshalJSON writes p with its durations as duration strings.
func (p PartitionStats) MarshalJSON() ([]byte, error) {
	type plain PartitionStats
	return json.Marshal(struct {
		plain
		DeadLetterBlockedFor string `json:"dead_letter_blocked_for"`
		CommitFailingFor     string `json:"commit_failing_for"`
		WatermarkAge         string `json:"watermark_age"`
		StalledFor           string `json:"stalled_for"`
	}{plain(p), p.DeadLetterBlockedFor.String(), p.CommitFailingFor.String(), p.WatermarkAge.String(), p.StalledFor.String()})
}

// MarshalJSON writes s with Oldest as a duration string.
func (s ParkStats) MarshalJSON() ([]byte, error) {
	type plain ParkStats
	return json.Marshal(struct {
		plain
		Oldest string `json:"oldest"`
	}{plain(s), s.Oldest.String()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *ParkStats) UnmarshalJSON(b []byte) error {
	type plain ParkStats
	v := struct {
		*plain
		Oldest string `json:"oldest"`
	}{plain: (*plain)(s)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return setDuration(&s.Oldest, "oldest", v.Oldest)
}

// MarshalJSON writes s with RunningFor as a duration string.
func (s SessionStats) MarshalJSON() ([]byte, error) {
	type plain SessionStats
	return json.Marshal(struct {
		plain
		RunningFor string `json:"running_for"`
	}{plain(s), s.RunningFor.String()})
}

// MarshalJSON writes b with OpenedAt in RFC 3339, or null while the
// breaker has never opened.
func (b BreakerStats) MarshalJSON() ([]byte, error) {
	type plain BreakerStats
	var at *time.Time
	if !b.OpenedAt.IsZero() {
		at = &b.OpenedAt
	}
	return json.Marshal(struct {
		plain
		OpenedAt *time.Time `json:"opened_at"`
	}{plain(b), at})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Stats) UnmarshalJSON(b []byte) error {
	type plain Stats
	v := struct {
		*plain
		CommitLatency string `json:"commit_latency"`
	}{plain: (*plain)(s)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return setDuration(&s.CommitLatency, "commit_latency", v.CommitLatency)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *PartitionStats) UnmarshalJSON(b []byte) error {
	type plain PartitionStats
	v := struct {
		*plain
		DeadLetterBlockedFor string `json:"dead_letter_blocked_for"`
		CommitFailingFor     string `json:"commit_failing_for"`
		WatermarkAge         string `json:"watermark_age"`
		StalledFor           string `json:"stalled_for"`
	}{plain: (*plain)(p)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return errors.Join(
		setDuration(&p.DeadLetterBlockedFor, "dead_letter_blocked_for", v.DeadLetterBlockedFor),
		setDuration(&p.CommitFailingFor, "commit_failing_for", v.CommitFailingFor),
		setDuration(&p.WatermarkAge, "watermark_age", v.WatermarkAge),
		setDuration(&p.StalledFor, "stalled_for", v.StalledFor))
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *SessionStats) UnmarshalJSON(b []byte) error {
	type plain SessionStats
	v := struct {
		*plain
		RunningFor string `json:"running_for"`
	}{plain: (*plain)(s)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return setDuration(&s.RunningFor, "running_for", v.RunningFor)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (b *BreakerStats) UnmarshalJSON(data []byte) error {
	type plain BreakerStats
	v := struct {
		*plain
		OpenedAt *time.Time `json:"opened_at"`
	}{plain: (*plain)(b)}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	b.OpenedAt = time.Time{}
	if v.OpenedAt != nil {
		b.OpenedAt = *v.OpenedAt
	}
	return nil
}

// setDuration sets *d from the duration string v of JSON field name; an
// absent (empty) one is zero.
func setDuration(d *time.Duration, name, v string) error {
	*d = 0
	if v == "" {
		return nil
	}
	x, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("consumer: stats JSON field %s: %w", name, err)
	}
	*d = x
	return nil
}

// MarshalJSON writes g with OldestWait as a duration string.
func (g GrowthStats) MarshalJSON() ([]byte, error) {
	type plain GrowthStats
	return json.Marshal(struct {
		plain
		OldestWait string `json:"oldest_wait"`
	}{plain(g), g.OldestWait.String()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (g *GrowthStats) UnmarshalJSON(b []byte) error {
	type plain GrowthStats
	v := struct {
		*plain
		OldestWait string `json:"oldest_wait"`
	}{plain: (*plain)(g)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return setDuration(&g.OldestWait, "oldest_wait", v.OldestWait)
}
