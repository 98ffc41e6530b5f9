package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/hashring"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Scenario 1, the seed: 50,000 messages over 10 sessions, 10% transient
// errors: no violation, nothing lost.
func TestSeedScenario(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.topics(t, 6)
	l := lanestest.NewLedger()
	sessions := sessionNames(10)
	start := time.Now()
	c.produce(t, topic, sessions, 5000, l)
	startMember(t, "m1", c.consumerConfig("seed", topic, dlq), handler("m1", l, faults{transient: 0.10}))
	waitFinished(t, l, 50_000, 5*time.Minute)
	assertGroupProtocol(t, c, groupName("seed"))
	c.readDLQ(t, dlq, l)
	assertClean(t, c, l.Report(), time.Since(start), false)
}

// Scenario 2, scale: 1,000 sessions, 200,000 messages, three members of one
// group.
func TestScaleScenario(t *testing.T) {
	longOnly(t, "the scale scenario")
	c := newCluster(t)
	topic, dlq := c.topics(t, 12)
	l := lanestest.NewLedger()
	start := time.Now()
	cfg := c.consumerConfig("scale", topic, dlq)
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("m%d", i)
		startMember(t, name, cfg, handler(name, l, faults{transient: 0.01}))
	}
	c.produce(t, topic, sessionNames(1000), 200, l)
	waitFinished(t, l, 200_000, 10*time.Minute)
	c.readDLQ(t, dlq, l)
	assertClean(t, c, l.Report(), time.Since(start), false)
}

// Scenario 4, rebalance storm: members join and leave every second while
// 10% of attempts fail and are retried.
func TestRebalanceStorm(t *testing.T) {
	longOnly(t, "the rebalance storm")
	c := newCluster(t)
	topic, dlq := c.topics(t, 8)
	l := lanestest.NewLedger()
	sessions := sessionNames(50)
	const per = 600
	start := time.Now()
	c.produce(t, topic, sessions, per, l)
	cfg := c.consumerConfig("storm", topic, dlq)
	f := faults{transient: 0.10, work: 20 * time.Millisecond}
	var members []*member
	next := 0
	add := func() {
		next++
		name := fmt.Sprintf("m%d", next)
		members = append(members, startMember(t, name, cfg, handler(name, l, f)))
	}
	add()
	add()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	changes := 0
	for i := 0; i < 10 && l.Accounted() < len(sessions)*per; i++ {
		time.Sleep(time.Second) // the storm's pace: one membership change a second
		if len(members) > 1 && rng.IntN(2) == 0 {
			k := rng.IntN(len(members))
			if err := members[k].stop(); err != nil {
				t.Errorf("member %s leaving: %v", members[k].name, err)
			}
			members = append(members[:k], members[k+1:]...)
		} else {
			add()
		}
		changes++
	}
	waitFinished(t, l, len(sessions)*per, 5*time.Minute)
	c.readDLQ(t, dlq, l)
	r := l.Report()
	t.Logf("%d membership changes", changes)
	assertClean(t, c, r, time.Since(start), false)
}

// Scenario 6, poison pills and bad data: permanent errors, malformed
// event-ID headers, nil keys, empty values and a 900 KB value each end
// handled or in the DLQ with the right reason; the consumer survives.
func TestPoisonAndBadData(t *testing.T) {
	c := newCluster(t)
	topic, dlq := c.topics(t, 3)
	l := lanestest.NewLedger()
	sessions := sessionNames(20)
	poison := map[string]bool{"chat-00003|5": true, "chat-00007|0": true, "chat-00019|9": true}
	c.produce(t, topic, sessions, 10, l)
	raw := c.client(t, kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	defer raw.Close()
	ctx := context.Background()
	odd := []*kgo.Record{
		{Topic: topic, Key: []byte("odd-1"), Value: []byte("odd-1|0"), Headers: []kgo.RecordHeader{{Key: "lanes-event-id", Value: []byte("not-a-uuid")}}},
		{Topic: topic, Key: nil, Value: []byte("nil-key|0")},
		{Topic: topic, Key: []byte("empty"), Value: []byte{}},
		{Topic: topic, Key: []byte("big"), Value: append([]byte("big|0|"), make([]byte, 900*1024)...)},
	}
	for _, r := range odd {
		if err := raw.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %q: %v", r.Key, err)
		}
	}
	oddSeen := make(chan string, 16)
	base := handler("m1", l, faults{permanent: poison})
	h := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		switch key := string(m.Record.Key); {
		case key == "odd-1":
			oddSeen <- "bad-event-id"
			if _, err := eventid.Parse(m.EventID); err != nil {
				return consumer.Permanent(err) // malformed ID: to the DLQ
			}
		case m.Record.Key == nil:
			oddSeen <- "nil-key"
			return nil
		case key == "empty":
			oddSeen <- "empty"
			return nil
		case key == "big":
			oddSeen <- fmt.Sprintf("big:%d", len(m.Record.Value))
			return nil
		}
		return base.Handle(ctx, m)
	})
	startMember(t, "m1", c.consumerConfig("poison", topic, dlq), h)
	waitFinished(t, l, len(sessions)*10, 2*time.Minute)
	got := map[string]bool{}
	for len(got) < 4 {
		select {
		case s := <-oddSeen:
			got[s] = true
		case <-time.After(time.Minute):
			t.Fatalf("odd records seen: %v", got)
		}
	}
	if !got[fmt.Sprintf("big:%d", 6+900*1024)] {
		t.Errorf("900 KB value not delivered whole: %v", got)
	}
	var recs []*kgo.Record
	deadline := time.Now().Add(time.Minute)
	for len(recs) < len(poison)+1 && time.Now().Before(deadline) {
		recs = c.readDLQ(t, dlq, l)
	}
	reasons := map[string]string{}
	for _, r := range recs {
		reasons[string(r.Value)] = header(r, "lanes-dlq-reason")
	}
	for p := range poison {
		if reasons[p] != "permanent" {
			t.Errorf("poison %s: DLQ reason %q", p, reasons[p])
		}
	}
	if reasons["odd-1|0"] != "permanent" {
		t.Errorf("malformed event ID record: DLQ reason %q", reasons["odd-1|0"])
	}
	r := l.Report()
	assertClean(t, c, r, 0, false)
	if r.DeadLettered != len(poison) {
		t.Errorf("DLQ holds %d of the %d poison messages", r.DeadLettered, len(poison))
	}
}

// Scenario 5, broker restart (real broker only): stop and start the broker
// mid-run; producer and consumer recover without loss.
func TestBrokerRestart(t *testing.T) {
	c := newCluster(t)
	if !c.real {
		t.Skip("broker restart needs the real broker (kafka.sh restart); kfake cannot restart with its data")
	}
	script, err := filepath.Abs("kafka/kafka.sh")
	if err != nil {
		t.Fatal(err)
	}
	topic, dlq := c.topics(t, 6)
	l := lanestest.NewLedger()
	sessions := sessionNames(100)
	start := time.Now()
	c.produce(t, topic, sessions, 100, l)
	// The second half of each session waits until the broker is back, so
	// the restart always lands in the middle of the run (records fetched,
	// work in flight, commits owed) however fast the first half goes.
	restarted := make(chan struct{})
	work := faulty(faults{transient: 0.05, work: 50 * time.Millisecond})
	gated := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		if _, seq, _ := strings.Cut(string(m.Record.Value), "|"); atoi(seq) >= 50 {
			select {
			case <-restarted:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return work.Handle(ctx, m)
	})
	startMember(t, "m1", c.consumerConfig("restart", topic, dlq), l.Handler("m1", gated))
	waitFinished(t, l, 1000, 2*time.Minute)
	out, err := exec.Command(script, "restart").CombinedOutput()
	if err != nil {
		t.Fatalf("kafka.sh restart: %v\n%s", err, out)
	}
	at := l.Accounted()
	close(restarted)
	t.Logf("broker restarted with %d of %d finished", at, len(sessions)*100)
	if at >= len(sessions)*100 {
		t.Fatal("the run finished before the restart: nothing was tested")
	}
	c.produceRange(t, topic, sessions[:50], 100, 120, l) // a producer connects after the restart
	waitFinished(t, l, len(sessions)*100+50*20, 5*time.Minute)
	c.readDLQ(t, dlq, l)
	assertClean(t, c, l.Report(), time.Since(start), true)
}

// Scenario 7, interop (real broker only): records keyed by session and sent
// by Kafka's own Java console producer are consumed in order by lanes, on
// the partitions lanes' default partitioner picks.
func TestJavaProducerInterop(t *testing.T) {
	c := newCluster(t)
	cp := os.Getenv("LANES_KAFKA_CLASSPATH")
	if !c.real || cp == "" {
		t.Skip("interop needs the real broker and its jars (LANES_KAFKA_CLASSPATH, set by make test-kafka)")
	}
	topic, dlq := c.topics(t, 6)
	sessions := sessionNames(40)
	const per = 25
	l := lanestest.NewLedger()
	input := ""
	for seq := 0; seq < per; seq++ {
		for _, s := range sessions {
			input += fmt.Sprintf("%s\t%s|%d\n", s, s, seq)
		}
	}
	cmd := exec.Command("java", "-Xmx256m", "-cp", cp, "org.apache.kafka.tools.ConsoleProducer",
		"--bootstrap-server", c.brokers[0], "--topic", topic,
		"--reader-property", "parse.key=true", "--reader-property", "key.separator=\t")
	cmd.Stdin = strings.NewReader(input)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("console producer: %v\n%s", err, out)
	}
	var mu sync.Mutex
	partOf := map[string]int32{}
	calls := 0
	total := len(sessions) * per
	all := make(chan struct{})
	// Java's records carry no lanes event ID: the call says where it is.
	h := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		start := time.Now()
		session, seqText, _ := strings.Cut(string(m.Record.Value), "|")
		seq, _ := strconv.Atoi(seqText)
		l.RecordCall(lanestest.Call{Member: "m1", Session: session, Seq: seq, Partition: m.Record.Partition,
			Offset: m.Record.Offset, Attempt: m.Attempt, Start: start, End: time.Now(), Final: true, OK: true})
		mu.Lock()
		defer mu.Unlock()
		partOf[m.SessionID] = m.Record.Partition
		if calls++; calls == total {
			close(all)
		}
		return nil
	})
	startMember(t, "m1", c.consumerConfig("interop", topic, dlq), h)
	select {
	case <-all:
	case <-time.After(2 * time.Minute):
		t.Fatalf("consumed %d of %d", l.Report().Calls, total)
	}
	r := l.Report()
	if r.Violations > 0 || r.Duplicates > 0 {
		t.Fatalf("Java-produced records out of order: %v %v", r, r.Details)
	}
	for _, s := range sessions {
		want, _ := hashring.KafkaPartition([]byte(s), 6)
		if partOf[s] != int32(want) {
			t.Errorf("session %s: Java put it on partition %d, lanes' default partitioner says %d", s, partOf[s], want)
		}
	}
	t.Logf("%d records from the Java console producer consumed in order; partitions agree for %d sessions", r.Calls, len(sessions))
}

// atoi is strconv.Atoi for the test's own numbers (-1 for anything else).
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}
