package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
)

// TestTopicMadeAgainWhileRunning: a consumed topic is deleted and made
// again while a member consumes it; the same sessions then send to the new
// topic, whose records start at offset 0 again and which has no commits.
// The member re-subscribes by itself (franz-go fails a topic made again with
// UNKNOWN_TOPIC_ID until it is purged and added back) and handles every
// message of the new topic, in order per session, once, and is ready after;
// none of the old topic's messages runs again. With two members, each finds
// the change and re-subscribes on its own; with parking on, the park
// topic's fences and commits of the old topic do not hold the new one.
func TestTopicMadeAgainWhileRunning(t *testing.T) {
	t.Run("one_member", func(t *testing.T) { testTopicMadeAgain(t, 1, false) })
	t.Run("two_members", func(t *testing.T) { testTopicMadeAgain(t, 2, false) })
	t.Run("parking", func(t *testing.T) { testTopicMadeAgain(t, 1, true) })
}

func testTopicMadeAgain(t *testing.T, members int, park bool) {
	c := newCluster(t)
	var topic, dlq string
	var cfg consumer.Config
	if park {
		topic, dlq = c.parkTopics(t) // parkPartitions (4) partitions, as below
		cfg = c.parkConfig("made-again-park", topic, dlq, 1000, consumer.ParkHold)
	} else {
		topic, dlq = c.topics(t, 4)
		cfg = c.consumerConfig(fmt.Sprintf("made-again-%d", members), topic, dlq)
	}
	l := lanestest.NewLedger()
	sessions := sessionNames(40)
	const per = 10
	total := len(sessions) * per
	c.produce(t, topic, sessions, per, l)
	var ms []*member
	for i := range members {
		name := fmt.Sprintf("m%d", i+1)
		ms = append(ms, startMember(t, name, cfg, handler(name, l, faults{})))
	}
	waitFinished(t, l, total, 2*time.Minute)

	start := time.Now()
	c.recreateTopic(t, topic, 4)
	c.produceRange(t, topic, sessions, per, 2*per, l) // the same sessions go on, in the new topic
	waitFinished(t, l, 2*total, 3*time.Minute)
	for _, m := range ms {
		waitFor(t, m.name+" ready after re-subscribing", 2*time.Minute, func() bool { return m.c.Health().Ready })
	}
	took := time.Since(start)
	for _, m := range ms {
		if err := m.stop(); err != nil {
			t.Fatal(err)
		}
	}
	r := l.Report()
	assertClean(t, c, r, took, false)
	if r.Duplicates != 0 || r.DeadLettered != 0 {
		t.Fatalf("%s; want every message once, none dead-lettered", r)
	}
}
