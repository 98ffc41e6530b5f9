package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/producer"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBrokerWithoutTopics: lanes broker without --topics says that no topic
// exists and how to make them, not that they are "created on first use":
// lanes' producer and consumer never create a topic (kept true below), and
// it says that it keeps nothing across a restart.
func TestBrokerWithoutTopics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // start, print, stop
	var out bytes.Buffer
	if err := run(ctx, []string{"broker", "--port", "0"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"no topics created", "never create a topic", "--topics a,b", "lanes topics create --brokers 127.0.0.1:",
		"kept in memory", "re-subscribe"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "first use") {
		t.Errorf("output promises topics created on first use:\n%s", out.String())
	}

	c, err := startBroker(0, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := producer.New(producer.Config{Brokers: c.ListenAddrs(), Topic: "chat", DeliveryTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, sendErr := p.Send(ctx, "chat-1", []byte("hello"))
	p.Close()
	cons, err := consumer.New(consumer.Config{Brokers: c.ListenAddrs(), Group: "g", Topics: []string{"chat"}, DeadLetterTopic: "chat-dlq"},
		consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	pingErr := cons.Ping(ctx)
	if sendErr == nil || !errors.Is(pingErr, consumer.ErrTopicMissing) {
		t.Fatalf("send to a topic never created: %v; consumer ping: %v; want both to fail", sendErr, pingErr)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("chat") {
		t.Fatalf("the producer or the consumer created topic chat: %v", topics.Names())
	}
}
