package dlq

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/hashring"
	"github.com/lanesdev/lanes/producer"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDLQInspectAndReplay: dead-lettered records are listed with their
// reasons, and replayed to their source topic with the same key and event
// ID, without the lanes-dlq-* headers, on the session's partition.
func TestDLQInspectAndReplay(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "chat", "chat-dlq"))
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
	dead := func(session, reason string, seq uint64) *kgo.Record {
		r := &kgo.Record{Topic: "chat-dlq", Key: []byte(session), Value: []byte(session + " says hi")}
		eventid.Stamp(r, eventid.ForSequence(session, seq), session)
		r.Headers = append(r.Headers,
			kgo.RecordHeader{Key: consumer.HeaderDLQTopic, Value: []byte("chat")},
			kgo.RecordHeader{Key: consumer.HeaderDLQPartition, Value: []byte("1")},
			kgo.RecordHeader{Key: consumer.HeaderDLQOffset, Value: []byte("42")},
			kgo.RecordHeader{Key: consumer.HeaderDLQReason, Value: []byte(reason)},
			kgo.RecordHeader{Key: consumer.HeaderDLQAttempts, Value: []byte("3")},
			kgo.RecordHeader{Key: consumer.HeaderDLQError, Value: []byte("boom")})
		return r
	}
	ctx := context.Background()
	if err := cl.ProduceSync(ctx, dead("chat-1", "permanent", 1), dead("chat-2", "retries-exhausted", 7),
		dead("chat-3", "permanent", 2)).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	for _, tc := range []struct {
		args    []string
		want    []string
		records int // lines printed for records
		values  bool
	}{
		{nil, []string{"3 records; permanent: 2; retries-exhausted: 1", "from=chat/1@42", "# PARTITION/OFFSET: the record's place in chat-dlq",
			" at=" + time.Now().UTC().Format("2006-01-02"), "error: boom"}, 3, false},
		{[]string{"--values"}, []string{`value: "chat-2 says hi"`}, 3, true},
		{[]string{"--limit", "1"}, []string{"3 records (1 shown, --limit 1); permanent: 2"}, 1, false},
	} {
		out.Reset()
		args := append([]string{"inspect", "--brokers", brokers, "--topic", "chat-dlq"}, tc.args...)
		if err := Run(ctx, args, &out, &out); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("inspect %v lacks %q:\n%s", tc.args, w, out.String())
			}
		}
		if n := strings.Count(out.String(), " at="); n != tc.records {
			t.Errorf("inspect %v printed %d records, want %d:\n%s", tc.args, n, tc.records, out.String())
		}
		if n := strings.Count(out.String(), "  value: "); (n > 0) != tc.values {
			t.Errorf("inspect %v printed %d values:\n%s", tc.args, n, out.String())
		}
	}

	// A dry run checks that the target topics exist.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--to", "nowhere"}, "target topic nowhere: no such topic on brokers " + brokers},
		{[]string{"--reason", "permanent"}, "2 records would be replayed"},
	} {
		out.Reset()
		err := Run(ctx, append([]string{"replay", "--dry-run", "--brokers", brokers, "--topic", "chat-dlq"}, tc.args...), &out, &out)
		if !strings.Contains(out.String(), tc.want) && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("replay --dry-run %v: %v %s, want %q", tc.args, err, out.String(), tc.want)
		}
	}
	if err := Run(ctx, []string{"inspect", "--brokers", brokers, "--topic", "no-dlq"}, &out, &out); err == nil ||
		!strings.Contains(err.Error(), "--topic no-dlq: no such topic on brokers "+brokers) {
		t.Errorf("inspect of a missing topic: %v", err)
	}

	out.Reset()
	if err := Run(ctx, []string{"replay", "--brokers", brokers, "--topic", "chat-dlq", "--reason", "permanent"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "2 records replayed") {
		t.Fatalf("replay output: %s", out.String())
	}
	got, err := readDLQ(ctx, dlqFlags{brokers: brokers, topic: "chat", timeout: time.Minute}, []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d records in chat, want 2", len(got))
	}
	for _, r := range got {
		s := string(r.Key)
		if want, _ := hashring.KafkaPartition(r.Key, 4); int(r.Partition) != want {
			t.Errorf("%s replayed to partition %d, want %d", s, r.Partition, want)
		}
		if eventid.FromRecord(r) != eventid.ForSequence(s, map[string]uint64{"chat-1": 1, "chat-3": 2}[s]) {
			t.Errorf("%s: event ID changed on replay", s)
		}
		for _, h := range r.Headers {
			if strings.HasPrefix(h.Key, "lanes-dlq-") {
				t.Errorf("%s: replayed with header %s", s, h.Key)
			}
		}
	}
	if err := Run(ctx, []string{"replay", "--topic", "x"}, &out, &out); err == nil {
		t.Error("replay without --brokers succeeded")
	}
}

// TestDLQUnreachable: when no broker answers, a dlq command gives up (at
// once when the connection is refused, after --timeout when the broker
// accepts but stays silent) and says which brokers it waited for and what
// for.
func TestDLQUnreachable(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	conns.Add(1)
	go func() { // accept and never answer
		defer conns.Done()
		var held []net.Conn
		for {
			c, err := silent.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	defer conns.Wait()
	defer silent.Close()
	for _, tc := range []struct {
		name, broker, want string
	}{
		{"refused", "127.0.0.1:1", "brokers 127.0.0.1:1, looking up topic chat-dlq: "},
		{"silent", silent.Addr().String(), "brokers " + silent.Addr().String() + " did not answer within --timeout 300ms while looking up topic chat-dlq"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Run(context.Background(), []string{"inspect", "--brokers", tc.broker, "--topic", "chat-dlq", "--timeout", "300ms"},
				&bytes.Buffer{}, &bytes.Buffer{})
			if err == nil {
				t.Fatal("inspect with no broker answering succeeded")
			}
			for _, want := range []string{tc.want, "check "} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

// TestBadFlags: wrong input is rejected, -h exits cleanly, and the message
// names the one flag (or argument) that is wrong, never an internal package.
func TestBadFlags(t *testing.T) {
	t.Setenv("LANES_SASL_PASSWORD", "")
	b := func(cmd string, extra ...string) []string {
		return append([]string{cmd, "--brokers", "127.0.0.1:1", "--topic", "chat-dlq"}, extra...)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "want a command: inspect or replay"},
		{[]string{"list"}, `unknown command "list"`},
		{[]string{"inspect", "--topic", "x"}, "--brokers is required"},
		{[]string{"replay", "--brokers", "127.0.0.1:1"}, "--topic is required"},
		{b("inspect", "--limit", "-1"), "--limit -1"},
		{b("inspect", "--timeout", "0s"), "--timeout 0s"},
		{b("inspect", "extra"), `unexpected argument "extra"`},
		{b("replay", "extra"), `unexpected argument "extra"`},
		{b("inspect", "--reason", "permanent"), "flag provided but not defined: --reason"},
		{b("replay", "--limit", "3"), "flag provided but not defined: --limit"},
		{b("replay", "--reason", "permament"), `--reason "permament": want one of permanent, decode, retries-exhausted, timeout, stalled, park-exhausted, park-lost`},
		{b("replay", "--rate", "-1"), "--rate -1: want a number of records a second above 0, or 0 for no cap"},
		{b("replay", "--rate", "NaN"), "--rate NaN: want a number of records a second above 0, or 0 for no cap"},
		{b("replay", "--rate", "+Inf"), "--rate +Inf: want a number of records a second above 0, or 0 for no cap"},
		{b("replay", "--rate", "1e-11"), "--rate 1e-11: want at least 1.1e-10 records a second (one every 292 years), or 0 for no cap"},
		{b("replay", "--sasl-user", "u"), "--sasl-user needs --sasl-mechanism"},
		{b("inspect", "--tls-cert", "c.pem"), "--tls-key: missing"},
		{b("inspect", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "u"), "--sasl-password: missing"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var errOut bytes.Buffer
			err := Run(context.Background(), tc.args, &bytes.Buffer{}, &errOut)
			if err == nil || !strings.Contains(err.Error()+errOut.String(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			for _, internal := range []string{"lanestest", "kfake", "kadm", "kgo"} {
				if strings.Contains(err.Error(), internal) {
					t.Errorf("error %q names the internal package %s", err, internal)
				}
			}
		})
	}
}

// TestReplayEveryReason: replay --reason accepts every reason the consumer
// writes (consumer.Reasons, so the park ones too) and picks exactly the
// records dead-lettered for it.
func TestReplayEveryReason(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "chat", "chat-dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	reasons := consumer.Reasons()
	for _, r := range []consumer.Reason{consumer.ReasonParkExhausted, consumer.ReasonParkLost} {
		if !slices.Contains(reasons, r) {
			t.Errorf("consumer.Reasons() lacks %s", r)
		}
	}
	for i, r := range reasons {
		rec := &kgo.Record{Topic: "chat-dlq", Key: []byte(fmt.Sprint("chat-", i)), Headers: []kgo.RecordHeader{
			{Key: consumer.HeaderDLQTopic, Value: []byte("chat")}, {Key: consumer.HeaderDLQReason, Value: []byte(r)}}}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range reasons {
		var out bytes.Buffer
		err := Run(ctx, []string{"replay", "--dry-run", "--brokers", strings.Join(c.ListenAddrs(), ","), "--topic", "chat-dlq",
			"--reason", string(r)}, &out, &out)
		if err != nil || !strings.Contains(out.String(), fmt.Sprintf("key=\"chat-%d\"", i)) || !strings.Contains(out.String(), "1 record would be replayed") {
			t.Errorf("replay --reason %s: %v\n%s", r, err, out.String())
		}
	}
}

// cancelAfter is a writer that cancels when a line says n records were
// replayed.
type cancelAfter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if strings.Contains(c.buf.String(), fmt.Sprintf("replayed %d of", c.n)) {
		c.cancel()
	}
	return len(p), nil
}

func (c *cancelAfter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// TestReplayRateStopResume: 30 dead letters replayed at 40 a second; the
// replay is stopped (as by Ctrl-C) after 10, says how to go on, and the
// same command sends the other 20; a third run sends nothing. The target
// gets each event once, and never faster than the rate (by the sent
// records' timestamps, one record of slack). A skip list leaves a
// session out.
func TestReplayRateStopResume(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "chat", "chat-dlq"))
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
	var dead []*kgo.Record
	for i := range 33 {
		s := fmt.Sprintf("chat-%d", i%3)
		if i >= 30 {
			s = "chat-skip"
		}
		r := &kgo.Record{Topic: "chat-dlq", Key: []byte(s), Value: []byte(fmt.Sprint(i))}
		eventid.Stamp(r, eventid.ForSequence(s, uint64(i)), s)
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: consumer.HeaderDLQTopic, Value: []byte("chat")},
			kgo.RecordHeader{Key: consumer.HeaderDLQReason, Value: []byte("permanent")})
		dead = append(dead, r)
	}
	ctx := context.Background()
	if err := cl.ProduceSync(ctx, dead...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	args := []string{"replay", "--brokers", brokers, "--topic", "chat-dlq", "--rate", "40", "--progress", "1ns", "--skip-session", "chat-skip"}
	rctx, cancel := context.WithCancel(ctx)
	w := &cancelAfter{n: 10, cancel: cancel}
	if err := Run(rctx, args, w, w); err != nil {
		t.Fatalf("the stopped replay: %v\n%s", err, w)
	}
	cancel()
	if !strings.Contains(w.String(), "stopped after 10 of 30 records: run the same command again") {
		t.Fatalf("the stopped replay said:\n%s", w)
	}
	var out bytes.Buffer
	if err := Run(ctx, args, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "20 records replayed (10 records of this selection replayed before") {
		t.Fatalf("the resumed replay said:\n%s", out.String())
	}
	out.Reset()
	if err := Run(ctx, args, &out, &out); err != nil || !strings.Contains(out.String(), "0 records replayed (30 records") {
		t.Fatalf("a third run: %v\n%s", err, out.String())
	}
	got, err := readDLQ(ctx, dlqFlags{brokers: brokers, topic: "chat", timeout: time.Minute}, []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var ats []time.Time
	for _, r := range got {
		id := eventid.FromRecord(r)
		if seen[id] || string(r.Key) == "chat-skip" {
			t.Fatalf("event %s (%s) replayed twice, or skipped session replayed", id, r.Key)
		}
		seen[id] = true
		ats = append(ats, r.Timestamp)
	}
	if len(seen) != 30 {
		t.Fatalf("%d events replayed, want 30", len(seen))
	}
	slices.SortFunc(ats, func(a, b time.Time) int { return a.Compare(b) })
	for i := range ats {
		for j := i + 2; j < len(ats); j++ { // burst 1, one record of slack
			if least := time.Duration(float64(j-i-1) / 40 * float64(time.Second)); ats[j].Sub(ats[i]) < least-time.Millisecond {
				t.Fatalf("records %d to %d sent in %v; at 40/s at least %v", i, j, ats[j].Sub(ats[i]), least)
			}
		}
	}
}

// deadCopy is the dead-letter copy of r the consumer writes
// (deadLetters.record): r's key, value and headers, plus lanes-dlq-*.
func deadCopy(r *kgo.Record, dlq string) *kgo.Record {
	h := append([]kgo.RecordHeader(nil), r.Headers...)
	h = append(h, kgo.RecordHeader{Key: consumer.HeaderDLQTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: consumer.HeaderDLQPartition, Value: []byte(fmt.Sprint(r.Partition))},
		kgo.RecordHeader{Key: consumer.HeaderDLQOffset, Value: []byte(fmt.Sprint(r.Offset))},
		kgo.RecordHeader{Key: consumer.HeaderDLQReason, Value: []byte("permanent")})
	return &kgo.Record{Topic: dlq, Key: r.Key, Value: r.Value, Headers: h}
}

// TestReplayKeepsPlacement: a replayed record lands on its session's
// partition by the scheme of its lanes-placement header, over the target's
// partition count now, and is stamped again as the producer stamps: a
// PartitionJump session's record on the session's jump partition (not the
// murmur2 one, where the session's other records are not), a record
// stamped jump/4 on the session's jump partition of 8 (stamped jump/8), a
// kafka/8 or an unstamped one (another producer's) by murmur2, stamped
// kafka/8.
func TestReplayKeepsPlacement(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(8, "chat"), kfake.SeedTopics(1, "chat-dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	brokers := strings.Join(c.ListenAddrs(), ",")
	var split []string // sessions whose jump and murmur2 partitions of 8 differ
	for i := 0; len(split) < 4 && i < 1000; i++ {
		s := fmt.Sprint("chat-", i)
		j, _ := hashring.JumpPartition(s, 8)
		k, _ := hashring.KafkaPartition([]byte(s), 8)
		if j != k {
			split = append(split, s)
		}
	}
	if len(split) < 4 {
		t.Fatalf("%d sessions whose jump and murmur2 partitions differ in 1000", len(split))
	}
	jumped, stale, kafka, plain := split[0], split[1], split[2], split[3]
	for _, tc := range []struct {
		session string
		scheme  producer.Partitioning
	}{{jumped, producer.PartitionJump}, {kafka, producer.PartitionKafka}} {
		p, err := producer.New(producer.Config{Brokers: c.ListenAddrs(), Topic: "chat", Partitioning: tc.scheme})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Send(ctx, tc.session, []byte("first"))
		p.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	orig, err := readDLQ(ctx, dlqFlags{brokers: brokers, topic: "chat", timeout: time.Minute}, []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)})
	if err != nil || len(orig) != 2 {
		t.Fatalf("the producer's records: %d, %v", len(orig), err)
	}
	var dead []*kgo.Record
	for _, r := range orig {
		dead = append(dead, deadCopy(r, "chat-dlq"))
	}
	dead = append(dead, deadCopy(&kgo.Record{Topic: "chat", Key: []byte(stale), Value: []byte("first"),
		Headers: []kgo.RecordHeader{{Key: hashring.HeaderPlacement, Value: []byte("jump/4")}}}, "chat-dlq"),
		deadCopy(&kgo.Record{Topic: "chat", Key: []byte(plain), Value: []byte("first")}, "chat-dlq"))
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, dead...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Run(ctx, []string{"replay", "--brokers", brokers, "--topic", "chat-dlq"}, &out, &out); err != nil || !strings.Contains(out.String(), "4 records replayed") {
		t.Fatalf("replay: %v\n%s", err, out.String())
	}
	got, err := readDLQ(ctx, dlqFlags{brokers: brokers, topic: "chat", timeout: time.Minute}, []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)})
	if err != nil || len(got) != 6 {
		t.Fatalf("chat after the replay: %d records, %v; want 6", len(got), err)
	}
	jump8 := func(s string) int { p, _ := hashring.JumpPartition(s, 8); return p }
	kafka8 := func(s string) int { p, _ := hashring.KafkaPartition([]byte(s), 8); return p }
	want := map[string]struct {
		partition int
		placement string
	}{jumped: {jump8(jumped), "jump/8"}, stale: {jump8(stale), "jump/8"}, kafka: {kafka8(kafka), "kafka/8"}, plain: {kafka8(plain), "kafka/8"}}
	for _, r := range got {
		pl, _ := eventid.Header(r, hashring.HeaderPlacement)
		w := want[string(r.Key)]
		if int(r.Partition) != w.partition || pl != w.placement {
			t.Errorf("record %q of %s on partition %d, placement %q; want partition %d, placement %q",
				r.Value, r.Key, r.Partition, pl, w.partition, w.placement)
		}
	}
}

// TestTransactionalDLQ: a consumer with Config.Transactions writes its
// dead-letter copies inside its transactions, so its dead-letter topic
// holds commit and abort markers, the copies of aborted transactions, and
// those of a transaction still open. inspect, replay and the console's
// counts read the committed copies only, and finish at once though the
// last offset before the end is a marker (franz-go hands markers back only
// when asked). Partition 0: an aborted copy, then a committed one (its
// last offset a commit marker); partition 1: a copy written without a
// transaction, then an open transaction's.
func TestTransactionalDLQ(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "chat"), kfake.SeedTopics(2, "chat-dlq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // after the clients' (t.Cleanup below): a transactional client closed after the cluster waits
	ctx := context.Background()
	brokers := strings.Join(c.ListenAddrs(), ",")
	dead := func(session string, partition int32) *kgo.Record {
		return &kgo.Record{Topic: "chat-dlq", Partition: partition, Key: []byte(session), Value: []byte(session), Headers: []kgo.RecordHeader{
			{Key: consumer.HeaderDLQTopic, Value: []byte("chat")}, {Key: consumer.HeaderDLQReason, Value: []byte("timeout")}}}
	}
	client := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	tx := client(kgo.TransactionalID("dlq-tx"))
	for _, tc := range []struct {
		session string
		end     kgo.TransactionEndTry
	}{{"aborted", kgo.TryAbort}, {"committed", kgo.TryCommit}} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := tx.ProduceSync(ctx, dead(tc.session, 0)).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, tc.end); err != nil {
			t.Fatal(err)
		}
	}
	if err := client().ProduceSync(ctx, dead("plain", 1)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	open := client(kgo.TransactionalID("dlq-open"))
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := open.ProduceSync(ctx, dead("open", 1)).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	if err := Run(ctx, []string{"inspect", "--brokers", brokers, "--topic", "chat-dlq", "--timeout", "5s"}, &out, &out); err != nil {
		t.Fatalf("inspect: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "2 records; timeout: 2") || !strings.Contains(out.String(), `key="committed"`) ||
		!strings.Contains(out.String(), `key="plain"`) || strings.Contains(out.String(), `"aborted"`) || strings.Contains(out.String(), `"open"`) {
		t.Errorf("inspect lists other than the committed copies and the plain one:\n%s", out.String())
	}
	out.Reset()
	if err := Run(ctx, []string{"replay", "--brokers", brokers, "--topic", "chat-dlq", "--timeout", "20s"}, &out, &out); err != nil ||
		!strings.Contains(out.String(), "2 records replayed") {
		t.Fatalf("replay: %v\n%s", err, out.String())
	}
	got, err := readDLQ(ctx, dlqFlags{brokers: brokers, topic: "chat", timeout: 20 * time.Second}, []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)})
	var keys []string
	for _, r := range got {
		keys = append(keys, string(r.Key))
	}
	slices.Sort(keys)
	if err != nil || !slices.Equal(keys, []string{"committed", "plain"}) {
		t.Errorf("replayed %q (%v), want the committed copy and the plain one", keys, err)
	}
	counts, n, err := CountByReason(ctx, c.ListenAddrs(), "chat-dlq", nil, 20*time.Second)
	if err != nil || n != 2 || counts["timeout"] != 2 {
		t.Errorf("the console's counts: %v, %d, %v; want timeout: 2", counts, n, err)
	}
}

// TestReadTimeoutSaysWhere: when the brokers answer the listing but not
// the fetches, a read gives up after --timeout and says how far each
// partition got and where its end is.
func TestReadTimeoutSaysWhere(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "chat-dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "chat-dlq", Partition: 0, Value: []byte("a")},
		&kgo.Record{Topic: "chat-dlq", Partition: 0, Value: []byte("b")}, &kgo.Record{Topic: "chat-dlq", Partition: 1, Value: []byte("c")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release) // before c.Close: wakes the held fetches
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
	err = Run(context.Background(), []string{"inspect", "--brokers", strings.Join(c.ListenAddrs(), ","), "--topic", "chat-dlq", "--timeout", "300ms"},
		&bytes.Buffer{}, &bytes.Buffer{})
	want := "did not answer within --timeout 300ms while reading chat-dlq (0 records read; 2 partitions not yet read to the end: " +
		"partition 0 at offset 0 (end 2), partition 1 at offset 0 (end 1))"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("inspect with the fetches unanswered: %v, want an error with %q", err, want)
	}
}
