package consumer_test

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/lanesdev/lanes/consumer"
)

// Create the dead-letter and park topics a service needs before it
// starts (or at every deploy: a second run finds them ok): the park topic
// gets its source's partition count, both get cleanup.policy=delete.
func ExampleCreateTopics() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "chat"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()

	cfg := consumer.Config{
		Brokers:         cluster.ListenAddrs(),
		Group:           "chat-service",
		Topics:          []string{"chat"},
		DeadLetterTopic: "chat-dlq",
		Park:            consumer.ParkPolicy{Enabled: true},
	}
	ctx := context.Background()
	results, err := consumer.CreateTopics(ctx, cfg)
	for _, r := range results {
		fmt.Println(r)
	}
	fmt.Println("error:", err)

	results, err = consumer.CreateTopics(ctx, cfg)
	for _, r := range results {
		fmt.Print(r.Topic, " ", r.State, "; ")
	}
	fmt.Println("error:", err)
	// Output:
	// ok           consumed topic chat: 3 partitions, replication factor 1
	// created      dead-letter topic chat-dlq: 3 partitions, replication factor 1, cleanup.policy=delete
	// created      park topic chat.park (of chat): 3 partitions, replication factor 1, cleanup.policy=delete
	// error: <nil>
	// chat ok; chat-dlq ok; chat.park ok; error: <nil>
}
