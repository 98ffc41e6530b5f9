package hashring_test

import (
	"fmt"

	"github.com/lanesdev/lanes/hashring"
)

// The consumer picks one of W shards for a session with Jump over Sum64.
func ExampleJump() {
	shard := hashring.Jump(hashring.Sum64("chat-42"), 8)
	fmt.Println(shard >= 0 && shard < 8)
	// Output: true
}

// A gateway asks a ring which producer instance owns a session.
func ExampleRing() {
	ring, err := hashring.NewRing(hashring.RingConfig{}, "gw-a", "gw-b", "gw-c")
	if err != nil {
		fmt.Println(err)
		return
	}
	owner, _ := ring.Get("chat-1")
	fmt.Println(owner)
	// Output: gw-b
}

// KafkaPartition agrees with the Java client's default partitioner.
func ExampleKafkaPartition() {
	p, _ := hashring.KafkaPartition([]byte("chat-42"), 12)
	fmt.Println(p >= 0 && p < 12)
	// Output: true
}
