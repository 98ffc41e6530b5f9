package producer_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lanesdev/lanes/producer"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Two messages of one chat, in order, on an embedded broker.
func ExampleProducer_Send() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "chat"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	p, err := producer.New(producer.Config{Brokers: cluster.ListenAddrs(), Topic: "chat"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	ctx := context.Background()
	first, _ := p.Send(ctx, "chat-42", []byte("book a flight to London"), producer.WithSequence(1))
	second, _ := p.Send(ctx, "chat-42", []byte("make it Paris"), producer.WithSequence(2))
	fmt.Println(first.Partition == second.Partition, first.Offset < second.Offset)
	fmt.Println(first.EventID)
	// Output:
	// true true
	// e2b162c2-0206-5810-8c33-f8d997d004d5
}

// A gateway forwards each session to the producer instance that owns it.
func ExampleRouter() {
	r, _ := producer.NewRouter("gw-a", "gw-b", "gw-c")
	owner, _ := r.Owner("chat-42")
	again, _ := r.Owner("chat-42")
	fmt.Println(owner == again)
	// Output: true
}

// At start, a service checks that a broker answers and that the topics it
// sends to exist, instead of learning it from sends that time out.
func ExampleProducer_Ping() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "chat"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	p, err := producer.New(producer.Config{Brokers: cluster.ListenAddrs(), Topic: "chat"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fmt.Println(p.Ping(ctx))
	err = p.Ping(ctx, "audit") // sent to with WithTopic("audit")
	fmt.Println(errors.Is(err, producer.ErrUnknownTopic))
	// Output:
	// <nil>
	// true
}
