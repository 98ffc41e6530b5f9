package consumer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/offsets"
	"github.com/lanesdev/lanes/consumer/internal/parkset"
)

func TestParkConfigValidation(t *testing.T) {
	ok := Config{Brokers: []string{"127.0.0.1:9092"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "dlq",
		Park: ParkPolicy{Enabled: true}}
	h := HandlerFunc(func(context.Context, *Message) error { return nil })
	cases := []struct {
		name  string
		edit  func(*Config)
		field string // "" = valid
	}{
		{"valid", func(*Config) {}, ""},
		{"off, values set", func(c *Config) { c.Park = ParkPolicy{MaxAttempts: -1} }, "Park"},
		{"negative attempts", func(c *Config) { c.Park.AfterAttempts = -1 }, "Park.AfterAttempts"},
		{"negative after", func(c *Config) { c.Park.After = -time.Second }, "Park.After"},
		{"negative delay", func(c *Config) { c.Park.Delay = -1 }, "Park.Delay"},
		{"max delay below delay", func(c *Config) { c.Park.Delay, c.Park.MaxDelay = time.Minute, time.Second }, "Park.MaxDelay"},
		{"negative budget", func(c *Config) { c.Park.MaxAttempts = -2 }, "Park.MaxAttempts"},
		{"negative health age", func(c *Config) { c.Park.HealthAge = -1 }, "Park.HealthAge"},
		{"unknown policy", func(c *Config) { c.Park.OnExhausted = 9 }, "Park.OnExhausted"},
		{"park topic consumed", func(c *Config) { c.Topics = []string{"t", "t.park"} }, "Park.TopicSuffix"},
		{"park topic is the DLQ", func(c *Config) { c.DeadLetterTopic = "t.park" }, "Park.TopicSuffix"},
		{"no DLQ", func(c *Config) { c.DeadLetterTopic = ""; c.Retry.Forever = true }, "DeadLetterTopic"},
		{"skips stalled records, a StallTimeout below Park.After", func(c *Config) { c.SkipStalled, c.StallTimeout = true, 5*time.Second }, ""},
		{"parks after the retry budget", func(c *Config) { c.Park.AfterAttempts, c.Retry.MaxAttempts = 5, 4 }, ""},
		{"parks after the whole retry budget (parked when the budget ends)", func(c *Config) {
			c.Park.AfterAttempts, c.Retry.MaxAttempts, c.Park.After, c.Retry.MaxElapsed = 5, 4, time.Hour, time.Minute
		}, ""},
		{"parks after the budget, retrying forever", func(c *Config) {
			c.Park.AfterAttempts, c.Retry.MaxAttempts, c.Park.After, c.Retry.Forever = 5, 4, time.Hour, true
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.edit(&cfg)
			_, err := New(cfg, h)
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.field != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field+":")):
				t.Fatalf("New: %v; want ErrConfig naming %s", err, tc.field)
			}
		})
	}
	c, err := New(ok, h)
	if err != nil {
		t.Fatal(err)
	}
	p := c.cfg.Park
	if p.TopicSuffix != DefaultParkTopicSuffix || p.AfterAttempts != DefaultParkAfterAttempts || p.After != DefaultParkAfter ||
		p.Delay != DefaultParkDelay || p.MaxDelay != DefaultParkMaxDelay || p.MaxAttempts != DefaultParkMaxAttempts ||
		p.HealthAge != DefaultParkHealthAge || p.OnExhausted != ParkHold {
		t.Fatalf("defaults not applied: %+v", p)
	}
	if _, err := NewBatch(ok, BatchHandlerFunc(func(context.Context, []*Message) error { return nil })); !errors.Is(err, ErrConfig) {
		t.Fatalf("NewBatch with Park: %v; want ErrConfig", err)
	}
}

func TestShouldPark(t *testing.T) {
	p, err := ParkPolicy{Enabled: true, AfterAttempts: 3, After: time.Minute}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(100, 0)
	cause := errors.New("down")
	for _, tc := range []struct {
		err      error
		attempts int
		after    time.Duration
		want     bool
	}{
		{cause, 1, 0, false},
		{cause, 3, 0, true},
		{cause, 1, time.Minute, true},
		{Park(cause), 1, 0, true},
		{Permanent(Park(cause)), 1, 0, true},
	} {
		if got := p.shouldPark(tc.err, tc.attempts, t0, t0.Add(tc.after)); got != tc.want {
			t.Errorf("shouldPark(%v, %d attempts, failing %v) = %v; want %v", tc.err, tc.attempts, tc.after, got, tc.want)
		}
	}
	if Park(nil) != nil || IsPark(cause) || !IsPark(Park(cause)) || !errors.Is(Park(cause), cause) {
		t.Fatal("Park wraps and unwraps its error")
	}
}

func headerOf(r *kgo.Record, k string) string {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

func TestParkMetadata(t *testing.T) {
	for _, tc := range []struct {
		meta string
		rest string
		pc   parkCommit
		ok   bool
	}{
		{"lanes1:AbC;park2:12,7,3,classic,00ff,11ee", "lanes1:AbC", parkCommit{12, parkset.Fence{Off: 7, Gen: 3, Proto: "classic"}, topicIDs{"00ff", "11ee"}}, true},
		{";park2:1,0,-1,,,", "", parkCommit{1, parkset.Fence{Off: 0, Gen: -1, Proto: ""}, topicIDs{}}, true},
		{";park2:1,0,-1,,", "", noParkCommit, false}, // five fields: no protocol
		{";park2:1,0,-1,other,,", "", noParkCommit, false},
		{"lanes1:AbC", "lanes1:AbC", noParkCommit, false},
		{"lanes1:AbC;park2:x,7,3,,,", "lanes1:AbC", noParkCommit, false},
		{"lanes1:AbC;park2:12,7,3,", "lanes1:AbC", noParkCommit, false},
		{";park2:7,7,3,,,", "", noParkCommit, false},   // the fence in force is below the position
		{";park2:0,-1,-1,,,", "", noParkCommit, false}, // and there is one
		{";park1:12,7", ";park1:12,7", noParkCommit, false},
		{"member-id", "member-id", noParkCommit, false},
	} {
		rest, pc, ok := splitParkMeta(tc.meta)
		if rest != tc.rest || pc != tc.pc || ok != tc.ok {
			t.Errorf("splitParkMeta(%q) = %q %+v %v", tc.meta, rest, pc, ok)
		}
		if ok && pc.String() != strings.TrimPrefix(tc.meta, tc.rest) {
			t.Errorf("%+v written as %q, read from %q", pc, pc.String(), tc.meta)
		}
	}
	p := newPartition(context.Background(), partKey{"t", 0}, 1, 10, nil)
	p.enablePark(parkset.Rules{Delay: time.Second, MaxDelay: time.Second, MaxAttempts: 1}, "g", 9, "consumer")
	p.mu.Lock()
	p.pk.set.SetTopicID("00ab")
	p.pk.ids, p.pk.rebuilt = topicIDs{"00ab", "22cd"}, true
	p.pk.set.Replay(40, parkset.Entry{Kind: parkset.KindFence, Group: "g", Gen: 9}, time.Now())
	p.pk.set.Replay(41, parkset.Entry{Kind: parkset.KindFence, Group: "g", Gen: 10, Proto: "consumer"}, time.Now())
	p.pk.set.Add("s", 42, 5, time.Now())
	meta := p.parkMetaLocked(offsets.EncodeMetadata(3, []offsets.Range{{Start: 5, End: 5}}, 4096), 3)
	p.mu.Unlock()
	rest, pc, ok := splitParkMeta(meta)
	if _, rs, err := offsets.DecodeMetadata(rest); err != nil || len(rs) != 1 || !ok || pc != (parkCommit{42, parkset.Fence{Off: 41, Gen: 10, Proto: "consumer"}, topicIDs{"00ab", "22cd"}}) {
		t.Fatalf("metadata %q: completed %v (%v), park section %+v", meta, rs, err, pc)
	}
}

func TestParkReasons(t *testing.T) {
	parts := []PartitionStats{
		{Topic: "t", Partition: 0},
		{Topic: "t", Partition: 1, Park: ParkStats{Sessions: 2, Held: 1, Records: 5, Oldest: 20 * time.Minute}},
		{Topic: "t", Partition: 2, Park: ParkStats{Sessions: 1, Records: 1, Oldest: time.Minute}},
		{Topic: "t", Partition: 3, Park: ParkStats{Error: "park topic t.park missing"}},
	}
	got := parkReasons(parts, 15*time.Minute)
	if len(got) != 2 || !strings.HasPrefix(got[0], "t/1 oldest parked record is 20m0s old") || !strings.Contains(got[1], "t/3") {
		t.Fatalf("reasons %q", got)
	}
}
