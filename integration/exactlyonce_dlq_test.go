package integration

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
)

// Exactly-once with a dead-letter copy too large for its topic
// (docs/exactly-once.md): the dead-letter topic takes 5,000 bytes, and
// one input of 8,000 fails permanently. Its copy never goes into a
// transaction (Kafka would refuse it at every commit, aborting every
// transaction of the member): it holds its partition, named in Stats,
// Health and Run's error, while every other input's outputs are read at
// read_committed exactly once.
func TestExactlyOnceDeadLetterTooLarge(t *testing.T) {
	c := newCluster(t)
	topic, _ := c.topics(t, 2)
	out, dlq := topic+"-out", topic+"-small-dlq"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.CreateTopics(ctx, 2, out); err != nil {
		t.Fatal(err)
	}
	limit := "5000"
	cl := c.client(t)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": &limit}, dlq); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 8000)
	_, _ = rand.Read(big) // does not compress: brokers measure the batch as written
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("big"), Value: big}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	l := lanestest.NewLedger()
	sessions := sessionNames(20)
	const per = 20
	c.produce(t, topic, sessions, per, l)
	total := len(sessions) * per
	inner := l.Handler("m1", txHandler(out, faults{}))
	h := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		if string(m.Record.Key) == "big" {
			return consumer.Permanent(errors.New("cannot parse"))
		}
		return inner.Handle(ctx, m)
	})
	m := startMember(t, "m1", c.txConfig("eos-dlq-large", topic, dlq, "m1"), h)
	waitFinished(t, l, total, 2*time.Minute)
	waitFor(t, "the dead-letter copy held", time.Minute, func() bool { return m.c.Stats().DeadLetterBlocked == 1 })
	if r := strings.Join(m.c.Health().Reasons, "\n"); !strings.Contains(r, "MESSAGE_TOO_LARGE") {
		t.Errorf("Health reasons %q: want the held copy named", r)
	}
	err := m.stop()
	if !errors.Is(err, consumer.ErrUnfinished) || !strings.Contains(err.Error(), "MESSAGE_TOO_LARGE") {
		t.Errorf("Run: %v; want ErrUnfinished naming the copy that cannot be written", err)
	}
	st := m.c.Stats().Transactions
	r := l.Report()
	t.Logf("%s: %+v; %s", c.name(), st, r)
	if st.Aborted > 2 { // the copy in transactions aborted every one (a rebalance may abort one or two)
		t.Errorf("%d transactions aborted: the copy went into them", st.Aborted)
	}
	if r.Violations > 0 || r.Overlaps > 0 || r.Lost > 0 {
		t.Errorf("session order or accounting broken: %s", r)
	}
	checkExactlyOnce(t, c, out, total)
}
