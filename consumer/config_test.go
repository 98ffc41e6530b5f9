package consumer

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestConfigValidation(t *testing.T) {
	ok := Config{Brokers: []string{"127.0.0.1:9092"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "dlq"}
	h := HandlerFunc(func(context.Context, *Message) error { return nil })
	cases := []struct {
		name  string
		edit  func(*Config)
		field string // "" = valid
	}{
		{"valid", func(*Config) {}, ""},
		{"no brokers", func(c *Config) { c.Brokers = nil }, "Brokers"},
		{"empty broker", func(c *Config) { c.Brokers = []string{""} }, "Brokers"},
		{"no group", func(c *Config) { c.Group = "" }, "Group"},
		{"no topics", func(c *Config) { c.Topics = nil }, "Topics"},
		{"empty topic", func(c *Config) { c.Topics = []string{"a", ""} }, "Topics"},
		{"no DLQ", func(c *Config) { c.DeadLetterTopic = "" }, "DeadLetterTopic"},
		{"no DLQ, retry forever", func(c *Config) { c.DeadLetterTopic = ""; c.Retry.Forever = true }, ""},
		{"skip stalled, no DLQ", func(c *Config) { c.DeadLetterTopic = ""; c.Retry.Forever = true; c.SkipStalled = true }, "SkipStalled"},
		{"DLQ is consumed", func(c *Config) { c.DeadLetterTopic = "t" }, "DeadLetterTopic"},
		{"bad start", func(c *Config) { c.StartOffset = 7 }, "StartOffset"},
		{"negative shards", func(c *Config) { c.Shards = -1 }, "Shards"},
		{"negative buffer", func(c *Config) { c.MaxBufferedRecords = -5 }, "MaxBufferedRecords"},
		{"negative poll", func(c *Config) { c.MaxPollRecords = -1 }, "MaxPollRecords"},
		{"negative timeout", func(c *Config) { c.HandlerTimeout = -1 }, "HandlerTimeout"},
		{"negative commit", func(c *Config) { c.CommitInterval = -1 }, "CommitInterval"},
		{"negative revoke", func(c *Config) { c.RevokeTimeout = -1 }, "RevokeTimeout"},
		{"negative shutdown", func(c *Config) { c.ShutdownTimeout = -1 }, "ShutdownTimeout"},
		{"two loggers", func(c *Config) { l := zerolog.Nop(); c.Logger, c.Slog = &l, slog.Default() }, "Slog"},
		{"negative stall", func(c *Config) { c.StallTimeout = -time.Minute }, "StallTimeout"},
		{"retry multiplier", func(c *Config) { c.Retry.Multiplier = 0.5 }, "Retry.Multiplier"},
		{"retry jitter", func(c *Config) { c.Retry.Jitter = 2 }, "Retry.Jitter"},
		{"retry no jitter", func(c *Config) { c.Retry.Jitter = -1 }, ""},
		{"retry NoJitter, deprecated", func(c *Config) { c.Retry.NoJitter = true }, ""},
		{"retry NoJitter and no jitter", func(c *Config) { c.Retry.NoJitter, c.Retry.Jitter = true, -1 }, ""},
		{"retry NoJitter contradicts Jitter", func(c *Config) { c.Retry.NoJitter, c.Retry.Jitter = true, 0.2 }, "Retry.NoJitter"},
		{"retry attempts", func(c *Config) { c.Retry.MaxAttempts = -1 }, "Retry.MaxAttempts"},
		{"retry elapsed", func(c *Config) { c.Retry.MaxElapsed = -1 }, "Retry.MaxElapsed"},
		{"topic twice", func(c *Config) { c.Topics = []string{"t", "u", "t"} }, "Topics"},
		{"breaker fields, breaker off", func(c *Config) { c.Breaker.Window = time.Minute }, "Breaker"},
		{"park fields, parking off", func(c *Config) { c.Park.MaxAttempts = 3 }, "Park"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			cfg.Topics = append([]string(nil), ok.Topics...)
			tc.edit(&cfg)
			_, err := New(cfg, h)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v; want ErrConfig naming %s", err, tc.field)
			}
		})
	}
	if _, err := New(ok, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("nil handler: %v, want ErrConfig", err)
	}
}

// TestDefaults: every Default* constant is what New applies to a zero
// field.
func TestDefaults(t *testing.T) {
	c, err := New(Config{Brokers: []string{"b:1"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "d"},
		HandlerFunc(func(context.Context, *Message) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.cfg
	for _, d := range []struct {
		name      string
		got, want any
	}{
		{"HandlerTimeout", cfg.HandlerTimeout, DefaultHandlerTimeout},
		{"MaxBufferedRecords", cfg.MaxBufferedRecords, DefaultMaxBufferedRecords},
		{"MaxPollRecords", cfg.MaxPollRecords, DefaultMaxPollRecords},
		{"FetchMaxWait", cfg.FetchMaxWait, DefaultFetchMaxWait},
		{"CommitInterval", cfg.CommitInterval, DefaultCommitInterval},
		{"CommitTimeout", cfg.CommitTimeout, DefaultCommitTimeout},
		{"RevokeTimeout", cfg.RevokeTimeout, DefaultRevokeTimeout},
		{"ShutdownTimeout", cfg.ShutdownTimeout, DefaultShutdownTimeout},
		{"LeaveTimeout", cfg.LeaveTimeout, DefaultLeaveTimeout},
		{"StallTimeout", cfg.StallTimeout, DefaultStallTimeout},
		{"MaxCommitMetadataBytes", cfg.MaxCommitMetadataBytes, DefaultMaxCommitMetadataBytes},
		{"MaxBatch", cfg.MaxBatch, DefaultMaxBatch},
		{"Shards", cfg.Shards, DefaultShardsPerCPU * runtime.GOMAXPROCS(0)},
		{"Retry.InitialInterval", cfg.Retry.InitialInterval, DefaultRetryInitial},
		{"Retry.Multiplier", cfg.Retry.Multiplier, DefaultRetryMultiplier},
		{"Retry.MaxInterval", cfg.Retry.MaxInterval, DefaultRetryMaxInterval},
		{"Retry.Jitter", cfg.Retry.Jitter, DefaultRetryJitter},
		{"Retry.MaxAttempts", cfg.Retry.MaxAttempts, DefaultRetryMaxAttempts},
		{"Retry.MaxElapsed", cfg.Retry.MaxElapsed, DefaultRetryMaxElapsed},
	} {
		if d.got != d.want {
			t.Errorf("%s: New applied %v, its documented default is %v", d.name, d.got, d.want)
		}
	}
	if cfg.Logger == nil || cfg.StartOffset != StartEarliest {
		t.Errorf("Logger %v, StartOffset %v", cfg.Logger, cfg.StartOffset)
	}
}

func TestRunTwice(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	c, err := New(e.config("g-twice", "chats"), newRecorder(1, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Run(ctx); err != nil {
		t.Fatalf("Run on a cancelled context: %v", err)
	}
	if err := c.Run(context.Background()); !errors.Is(err, ErrRunTwice) {
		t.Fatalf("second Run: %v, want ErrRunTwice", err)
	}
}

func TestPermanent(t *testing.T) {
	base := errors.New("bad input")
	p := Permanent(base)
	if !IsPermanent(p) || !errors.Is(p, base) {
		t.Fatal("Permanent does not wrap")
	}
	if !IsPermanent(errors.Join(errors.New("x"), p)) {
		t.Fatal("wrapped Permanent not detected")
	}
	if IsPermanent(base) || Permanent(nil) != nil {
		t.Fatal("plain error reported permanent, or Permanent(nil) != nil")
	}
}

// TestFetchMaxWaitPrecedence: Config.FetchMaxWait reaches the client, and
// a kgo.FetchMaxWait in ClientOptions wins over it, as documented.
func TestFetchMaxWaitPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want time.Duration
	}{
		{"default", Config{}, DefaultFetchMaxWait},
		{"config", Config{FetchMaxWait: time.Second}, time.Second},
		{"client option", Config{FetchMaxWait: time.Second, ClientOptions: []kgo.Opt{kgo.FetchMaxWait(2 * time.Second)}}, 2 * time.Second},
	} {
		tc.cfg.Brokers, tc.cfg.Group, tc.cfg.Topics, tc.cfg.DeadLetterTopic = []string{"127.0.0.1:1"}, "g", []string{"t"}, "d"
		c, err := New(tc.cfg, HandlerFunc(func(context.Context, *Message) error { return nil }))
		if err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(c.clientOpts()...)
		if err != nil {
			t.Fatal(err)
		}
		if got := cl.OptValue(kgo.FetchMaxWait); got != tc.want {
			t.Errorf("%s: client FetchMaxWait %v, want %v", tc.name, got, tc.want)
		}
		cl.Close()
	}
}

// TestRetryJitter: the randomization factor a lane's backoff gets from
// Retry.Jitter and the deprecated NoJitter, and that applying the
// defaults again keeps it (none stays none).
func TestRetryJitter(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    RetryPolicy
		want float64
	}{
		{"default", RetryPolicy{}, DefaultRetryJitter},
		{"set", RetryPolicy{Jitter: 0.2}, 0.2},
		{"none", RetryPolicy{Jitter: -1}, 0},
		{"any negative is none", RetryPolicy{Jitter: -0.5}, 0},
		{"NoJitter, deprecated", RetryPolicy{NoJitter: true}, 0},
		{"NoJitter and none", RetryPolicy{NoJitter: true, Jitter: -1}, 0},
	} {
		p, err := tc.p.withDefaults()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		again, err := p.withDefaults()
		if err != nil {
			t.Fatalf("%s, applied again: %v", tc.name, err)
		}
		for _, p := range []RetryPolicy{p, again} {
			if got := p.backoff().(*backoff.ExponentialBackOff).RandomizationFactor; got != tc.want {
				t.Errorf("%s: randomization factor %v, want %v", tc.name, got, tc.want)
			}
		}
	}
}
