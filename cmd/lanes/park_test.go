package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestParkInspectAndRelease: a consumer with parking holds a session after
// its budget was spent, its twelve later messages parked behind it;
// lanes park inspect lists it, for its group only, with the dead-lettered
// offset, ten parked offsets and how many more, and the command that
// releases it; that command, pasted as printed (the group has a park
// suffix of its own, which it names), run without the member, has the
// owner retry it: every message of the session is then handled, in order.
func TestParkInspectAndRelease(t *testing.T) {
	const suffix = ".park-chat-service" // a per-group suffix (docs/parking.md#identity)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "chat", "chat"+suffix, "chat-dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := strings.Join(c.ListenAddrs(), ",")
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range 13 {
		recs = append(recs, &kgo.Record{Topic: "chat", Key: []byte("alice"), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	down.Store(true)
	var handled atomic.Int64 // messages handled, in order, after the dead-lettered 0
	h := consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
		if down.Load() {
			return errors.New("alice's backend is down")
		}
		if want := fmt.Sprint(handled.Load() + 1); string(m.Record.Value) != want { // 0 was dead-lettered
			return consumer.Permanent(fmt.Errorf("message %s handled when %s was next", m.Record.Value, want))
		}
		handled.Add(1)
		return nil
	})
	cfg := consumer.Config{Brokers: c.ListenAddrs(), Group: "chat-service", Topics: []string{"chat"}, DeadLetterTopic: "chat-dlq",
		CommitInterval: 50 * time.Millisecond,
		Park: consumer.ParkPolicy{Enabled: true, TopicSuffix: suffix, AfterAttempts: 1, Delay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond,
			MaxAttempts: 1, OnExhausted: consumer.ParkHold}}
	cs, err := consumer.New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cs.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitUntil(t, "alice held with 12 parked messages", func() bool {
		st := cs.Stats()
		return len(st.Partitions) == 1 && st.Partitions[0].Park.Held == 1 && st.Partitions[0].Park.Records == 12
	})

	var out, errOut bytes.Buffer
	waitUntil(t, "the hold in a commit's park position", func() bool { // inspect reads what the group committed
		out.Reset()
		if err := run(context.Background(), []string{"park", "inspect", "--brokers", brokers, "--group", "chat-service", "--suffix", suffix}, &out, &errOut); err != nil {
			t.Fatalf("park inspect: %v\n%s", err, errOut.String())
		}
		return strings.Contains(out.String(), "held")
	})
	got := out.String()
	releaseCmd := "lanes park release --brokers " + brokers + " --group chat-service --topic chat --session alice --suffix " + suffix
	for _, want := range []string{`chat/0	session "alice"	held (source offset 0 dead-lettered; release: ` + releaseCmd + `)	12 records	offsets [1 2 3 4 5 6 7 8 9 10] and 2 more	since`,
		"1 session parked, 12 records (group chat-service, topic chat)"} {
		if !strings.Contains(got, want) {
			t.Fatalf("park inspect printed:\n%s\nwant a line with %q", got, want)
		}
	}
	out.Reset()
	if err := run(context.Background(), []string{"park", "inspect", "--brokers", brokers, "--group", "analytics", "--topic", "chat", "--suffix", suffix}, &out, &errOut); err != nil ||
		!strings.Contains(out.String(), "0 sessions parked, 0 records") {
		t.Fatalf("park inspect of another group: %v\n%s", err, out.String())
	}

	down.Store(false)
	out.Reset()
	args := shellWords(t, releaseCmd) // as a shell splits the pasted line
	if err := run(context.Background(), args[1:], &out, &errOut); err != nil ||
		!strings.Contains(out.String(), `released session "alice" on chat/0 (12 records parked; source offset 0 was dead-lettered)`) {
		t.Fatalf("park release, as inspect printed it: %v\n%s%s", err, out.String(), errOut.String())
	}
	waitUntil(t, "alice's 12 parked messages handled", func() bool { return handled.Load() == 12 })
	err = run(context.Background(), args[1:], &out, &errOut)
	if !errors.Is(err, consumer.ErrNotHeld) {
		t.Fatalf("a second release: %v; want ErrNotHeld", err)
	}
}

// shellWords splits line as sh does (quotes removed, nothing expanded
// that is quoted), the words of a command pasted into a shell.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	out, err := exec.Command("sh", "-c", `printf '%s\0' `+line).Output()
	if err != nil {
		t.Fatalf("sh splitting %q: %v", line, err)
	}
	words := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(words) < 2 || words[0] != "lanes" {
		t.Fatalf("%q: not a lanes command: %q", line, words)
	}
	return words
}

// waitUntil polls cond (a consumer's Stats, which has no change signal)
// until it holds, failing after a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
