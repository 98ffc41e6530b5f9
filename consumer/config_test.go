package consumer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
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
		{"DLQ is consumed", func(c *Config) { c.DeadLetterTopic = "t" }, "DeadLetterTopic"},
		{"bad start", func(c *Config) { c.StartOffset = 7 }, "StartOffset"},
		{"negative shards", func(c *Config) { c.Shards = -1 }, "Shards"},
		{"negative buffer", func(c *Config) { c.MaxBufferedRecords = -5 }, "MaxBufferedRecords"},
		{"negative poll", func(c *Config) { c.MaxPollRecords = -1 }, "MaxPollRecords"},
		{"negative idle", func(c *Config) { c.SessionIdle = -time.Second }, "SessionIdle"},
		{"negative timeout", func(c *Config) { c.HandlerTimeout = -1 }, "HandlerTimeout"},
		{"negative commit", func(c *Config) { c.CommitInterval = -1 }, "CommitInterval"},
		{"negative revoke", func(c *Config) { c.RevokeTimeout = -1 }, "RevokeTimeout"},
		{"negative shutdown", func(c *Config) { c.ShutdownTimeout = -1 }, "ShutdownTimeout"},
		{"retry multiplier", func(c *Config) { c.Retry.Multiplier = 0.5 }, "Retry.Multiplier"},
		{"retry jitter", func(c *Config) { c.Retry.Jitter = 2 }, "Retry.Jitter"},
		{"retry attempts", func(c *Config) { c.Retry.MaxAttempts = -1 }, "Retry.MaxAttempts"},
		{"retry elapsed", func(c *Config) { c.Retry.MaxElapsed = -1 }, "Retry.MaxElapsed"},
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

func TestDefaults(t *testing.T) {
	c, err := New(Config{Brokers: []string{"b:1"}, Group: "g", Topics: []string{"t"}, DeadLetterTopic: "d"},
		HandlerFunc(func(context.Context, *Message) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.cfg
	if cfg.SessionIdle != 30*time.Second || cfg.HandlerTimeout != time.Minute || cfg.CommitInterval != time.Second ||
		cfg.Retry.InitialInterval != 100*time.Millisecond || cfg.Retry.Multiplier != 2 ||
		cfg.Retry.MaxInterval != 10*time.Second || cfg.Shards < 4 || cfg.Logger == nil {
		t.Fatalf("defaults not applied: %+v", cfg)
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
