package eventid_test

import (
	"fmt"

	"github.com/lanesdev/lanes/eventid"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A client that numbers its messages gets the same ID on every resend.
func ExampleForSequence() {
	fmt.Println(eventid.ForSequence("chat-1", 7))
	// Output: ebeaf061-8662-5fac-8a1d-6566cc5de52f
}

func ExampleStamp() {
	r := &kgo.Record{Key: []byte("chat-1"), Value: []byte("book a flight to London")}
	eventid.Stamp(r, eventid.ForSequence("chat-1", 1), "chat-1")
	id, err := eventid.Parse(eventid.FromRecord(r))
	fmt.Println(id, err)
	// Output: ea94d9dc-27c9-5648-8855-e7c01904b78f <nil>
}
