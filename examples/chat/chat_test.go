package chat_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"example.com/chat"
	"github.com/lanesdev/lanes/lanestest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestChat runs the service on an embedded broker with the lanestest
// ledger inside dedup: every message is applied or dead-lettered, each
// chat's messages in the order they were posted, none lost.
func TestChat(t *testing.T) {
	b, err := lanestest.NewBroker(4, chat.Topic, chat.DeadLetters)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	l := lanestest.NewLedger()
	s, err := chat.New(b.Addrs(), l.Middleware("member-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	posts := map[string][]string{
		"chat-42": {"book a flight to London", "make it Paris", "on Friday"},
		"chat-7":  {"hello", "", "anyone there?"}, // "" cannot be applied: dead-lettered
	}
	for chatID, texts := range posts {
		for seq, text := range texts {
			if err := l.Send(ctx, s.Producer, chatID, seq, []byte(text)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := lanestest.Run(ctx, s.Consumer, l, lanestest.RunOptions{Broker: b, DeadLetterTopic: chat.DeadLetters}); err != nil {
		t.Fatal(err)
	}
	r := l.Report()
	if err := r.Err(false); err != nil || r.DeadLettered != 1 {
		t.Fatalf("%v; %d dead-lettered, want 1\n%s", err, r.DeadLettered, r)
	}
	if got := s.History("chat-42"); !slices.Equal(got, posts["chat-42"]) {
		t.Errorf("chat-42: %q, want %q", got, posts["chat-42"])
	}
	if got := s.History("chat-7"); !slices.Equal(got, []string{"hello", "anyone there?"}) {
		t.Errorf("chat-7: %q", got)
	}
}
