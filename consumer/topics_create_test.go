package consumer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicsEnv is an embedded broker with topics created as given (name →
// partitions, and compact for those in compacted).
func topicsEnv(t *testing.T, brokers int, topics map[string]int32, compacted ...string) (*env, *kadm.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	e := wrapEnv(t, c)
	adm := kadm.NewClient(e.client())
	for name, n := range topics {
		var configs map[string]*string
		for _, x := range compacted {
			if x == name {
				configs = map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
			}
		}
		if _, err := adm.CreateTopic(context.Background(), n, 1, configs, name); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	return e, adm
}

func topicsConfig(e *env, topics ...string) Config {
	return Config{Brokers: e.addrs, Group: "g", Topics: topics, DeadLetterTopic: "svc-dlq", Park: ParkPolicy{Enabled: true}}
}

// summary is "topic state partitions policy" per result, for comparing.
func summary(rs []TopicResult) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.Topic + " " + string(r.State) + " " + partitionsText(r.Partitions) + " " + r.CleanupPolicy + "\n")
	}
	return b.String()
}

// readBack says, per topic, its partitions and whether cleanup.policy=delete
// was set on it (not merely the default).
func readBack(t *testing.T, adm *kadm.Client, topics ...string) map[string]string {
	t.Helper()
	ctx := context.Background()
	tds, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, name := range topics {
		td := tds[name]
		if td.Err != nil {
			out[name] = "missing"
			continue
		}
		got := partitionsText(int32(len(td.Partitions)))
		if rc, err := rcs.On(name, nil); err == nil && rc.Err == nil {
			for _, c := range rc.Configs {
				if c.Key == "cleanup.policy" && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
					got += ", set " + *c.Value
				}
			}
		}
		out[name] = got
	}
	return out
}

// TestCreateTopicsParkAndDeadLetter: park topics are created with their
// source's partition count, the dead-letter topic with the largest
// source's, both with cleanup.policy=delete set; the consumer's own check
// accepts them; a second run finds everything ok and changes nothing.
func TestCreateTopicsParkAndDeadLetter(t *testing.T) {
	e, adm := topicsEnv(t, 1, map[string]int32{"orders": 6, "chats": 3})
	cfg := topicsConfig(e, "orders", "chats")
	ctx := context.Background()
	rs, err := CreateTopics(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := "orders ok 6 partitions \nchats ok 3 partitions \nsvc-dlq created 6 partitions delete\n" +
		"orders.park created 6 partitions delete\nchats.park created 3 partitions delete\n"
	if got := summary(rs); got != want {
		t.Fatalf("first run:\n%s\nwant:\n%s", got, want)
	}
	back := readBack(t, adm, "svc-dlq", "orders.park", "chats.park")
	for name, w := range map[string]string{"svc-dlq": "6 partitions, set delete", "orders.park": "6 partitions, set delete", "chats.park": "3 partitions, set delete"} {
		if back[name] != w {
			t.Errorf("%s on the broker: %q, want %q", name, back[name], w)
		}
	}
	v, _ := cfg.validate()
	for _, s := range []string{"orders", "chats"} {
		if _, err := newParkIO(&v).check(ctx, adm, s); err != nil {
			t.Errorf("the consumer's check of %s's park topic: %v", s, err)
		}
	}

	for _, run := range []func(context.Context, Config, ...TopicOption) ([]TopicResult, error){CreateTopics, CheckTopics} {
		rs, err = run(ctx, cfg)
		want := strings.ReplaceAll(want, "created", "ok")
		if got := summary(rs); err != nil || got != want {
			t.Fatalf("second run: %v\n%s\nwant:\n%s", err, got, want)
		}
	}
	if got := rs[4].String(); got != "ok           park topic chats.park (of chats): 3 partitions, replication factor 1, cleanup.policy=delete" {
		t.Errorf("String() = %q", got)
	}
}

// TestCreateTopicsReportsWrong: existing park topics with fewer or more
// partitions than their source, or compacted, and a compacted dead-letter
// topic are reported wrong, naming the topic, the fault and the fix; they
// are left as they are; the consumer's own check refuses the same park
// topics.
func TestCreateTopicsReportsWrong(t *testing.T) {
	e, adm := topicsEnv(t, 1, map[string]int32{"orders": 4, "orders.park": 2, "chats": 2, "chats.park": 2, "other": 2, "other.park": 3, "svc-dlq": 1},
		"chats.park", "svc-dlq")
	cfg := topicsConfig(e, "orders", "chats", "other")
	ctx := context.Background()
	rs, err := CreateTopics(ctx, cfg)
	if !errors.Is(err, ErrTopicUnfit) || errors.Is(err, ErrTopicMissing) {
		t.Fatalf("error %v, want ErrTopicUnfit only", err)
	}
	want := map[string][]string{
		"svc-dlq":     {"dead-letter topic svc-dlq: compacted (cleanup.policy=compact)", "--entity-name svc-dlq --add-config cleanup.policy=delete"},
		"orders.park": {"park topic orders.park (of orders): has 2 partitions, orders has 4: they must be equal", "kafka-topics.sh --alter --topic orders.park --partitions 4"},
		"chats.park":  {"park topic chats.park (of chats): compacted (cleanup.policy=compact)", "--entity-name chats.park --add-config cleanup.policy=delete"},
		"other.park":  {"park topic other.park (of other): has 3 partitions, other has 2", "partitions cannot be removed", "delete other.park and run lanes topics create again"},
	}
	for _, r := range rs {
		w, bad := want[r.Topic]
		switch {
		case !bad && (r.State != TopicOK || r.Err != nil):
			t.Errorf("%s: %s %v, want ok", r.Topic, r.State, r.Err)
		case bad && (r.State != TopicWrong || !errors.Is(r.Err, ErrTopicUnfit)):
			t.Errorf("%s: %s %v, want wrong", r.Topic, r.State, r.Err)
		case bad:
			for _, s := range w {
				if !strings.Contains(r.String(), s) || !strings.Contains(err.Error(), s) {
					t.Errorf("%s: %q and the error lack %q", r.Topic, r.String(), s)
				}
			}
		}
	}
	if len(rs) != 7 {
		t.Errorf("%d results, want 7:\n%s", len(rs), summary(rs))
	}
	if back := readBack(t, adm, "orders.park", "other.park"); back["orders.park"] != "2 partitions" || back["other.park"] != "3 partitions" {
		t.Errorf("park topics changed: %v", back)
	}
	v, _ := cfg.validate()
	for _, s := range []string{"orders", "chats", "other"} {
		if _, err := newParkIO(&v).check(ctx, adm, s); !errors.Is(err, errParkTopicBad) {
			t.Errorf("the consumer's check of %s's park topic: %v, want it refused", s, err)
		}
	}
}

// TestCreateTopicsMissingConsumed: a missing consumed topic is reported,
// not created, and so is its park topic (it has nothing to be sized from);
// the other topics are created. With TopicsCreateConsumed both are made.
func TestCreateTopicsMissingConsumed(t *testing.T) {
	e, adm := topicsEnv(t, 1, map[string]int32{"orders": 3})
	cfg := topicsConfig(e, "orders", "nosuch")
	ctx := context.Background()
	rs, err := CreateTopics(ctx, cfg)
	if !errors.Is(err, ErrTopicMissing) || errors.Is(err, ErrTopicUnfit) {
		t.Fatalf("error %v, want ErrTopicMissing only", err)
	}
	want := "orders ok 3 partitions \nnosuch missing 0 partitions \nsvc-dlq created 3 partitions delete\n" +
		"orders.park created 3 partitions delete\nnosuch.park missing 0 partitions \n"
	if got := summary(rs); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	for _, w := range []string{"missing      consumed topic nosuch: missing: create it first", "missing      park topic nosuch.park (of nosuch): missing: it needs the partition count of nosuch"} {
		if !strings.Contains(rs[1].String()+"\n"+rs[4].String(), w) {
			t.Errorf("results lack %q:\n%s\n%s", w, rs[1], rs[4])
		}
	}
	if back := readBack(t, adm, "nosuch", "nosuch.park"); back["nosuch"] != "missing" || back["nosuch.park"] != "missing" {
		t.Fatalf("created: %v", back)
	}

	rs, err = CreateTopics(ctx, cfg, TopicsCreateConsumed(5))
	if err != nil {
		t.Fatal(err)
	}
	want = "orders ok 3 partitions \nnosuch created 5 partitions \nsvc-dlq ok 3 partitions delete\n" +
		"orders.park ok 3 partitions delete\nnosuch.park created 5 partitions delete\n"
	if got := summary(rs); got != want {
		t.Fatalf("with TopicsCreateConsumed(5):\n%s\nwant:\n%s", got, want)
	}
}

// TestCheckTopicsOnlyReads: CheckTopics reports what is missing with the
// counts to create it with, and creates nothing; a dry run says what would
// be created, and creates nothing either.
func TestCheckTopicsOnlyReads(t *testing.T) {
	e, adm := topicsEnv(t, 1, map[string]int32{"orders": 2})
	cfg := topicsConfig(e, "orders", "new")
	ctx := context.Background()
	rs, err := CheckTopics(ctx, cfg, TopicsCreateConsumed(4), TopicsDeadLetterPartitions(7))
	if !errors.Is(err, ErrTopicMissing) {
		t.Fatalf("error %v, want ErrTopicMissing", err)
	}
	for i, w := range []string{"ok           consumed topic orders: 2 partitions",
		"missing      consumed topic new: missing: create it first",
		"missing      dead-letter topic svc-dlq: missing: create it with 7 partitions and cleanup.policy=delete",
		"missing      park topic orders.park (of orders): missing: create it with 2 partitions, as orders has, and cleanup.policy=delete",
		"missing      park topic new.park (of new): missing: it needs the partition count of new"} {
		if i >= len(rs) || !strings.HasPrefix(rs[i].String(), w) {
			t.Errorf("result %d: want %q, got:\n%s", i, w, summary(rs))
		}
	}
	rs, err = CreateTopics(ctx, cfg, TopicsDryRun(), TopicsCreateConsumed(4))
	want := "orders ok 2 partitions \nnew would create 4 partitions \nsvc-dlq would create 4 partitions delete\n" +
		"orders.park would create 2 partitions delete\nnew.park would create 4 partitions delete\n"
	if got := summary(rs); err != nil || got != want {
		t.Fatalf("dry run: %v\n%s\nwant:\n%s", err, got, want)
	}
	for name, got := range readBack(t, adm, "new", "svc-dlq", "orders.park", "new.park") {
		if got != "missing" {
			t.Errorf("%s created: %s", name, got)
		}
	}
}

// TestCreateTopicsReplicationFactor: created topics get the brokers'
// default replication factor (three on three brokers), or the one asked
// for; one the brokers refuse is reported with their reason.
func TestCreateTopicsReplicationFactor(t *testing.T) {
	e, adm := topicsEnv(t, 3, map[string]int32{"orders": 2})
	ctx := context.Background()
	for _, tc := range []struct {
		dlq  string
		opts []TopicOption
		want int
	}{{"dlq-default", nil, 3}, {"dlq-one", []TopicOption{TopicsReplicationFactor(1)}, 1}} {
		cfg := Config{Brokers: e.addrs, Group: "g", Topics: []string{"orders"}, DeadLetterTopic: tc.dlq}
		rs, err := CreateTopics(ctx, cfg, tc.opts...)
		if err != nil || rs[1].State != TopicCreated || int(rs[1].ReplicationFactor) != tc.want {
			t.Fatalf("%s: %v %+v, want created with %d replicas", tc.dlq, err, rs, tc.want)
		}
		tds, err := adm.ListTopics(ctx, tc.dlq)
		if err != nil {
			t.Fatal(err)
		}
		if got := tds[tc.dlq].Partitions.NumReplicas(); got != tc.want {
			t.Errorf("%s has %d replicas on the broker, want %d", tc.dlq, got, tc.want)
		}
	}
	cfg := Config{Brokers: e.addrs, Group: "g", Topics: []string{"orders"}, DeadLetterTopic: "dlq-five"}
	rs, err := CreateTopics(ctx, cfg, TopicsReplicationFactor(5))
	if !errors.Is(err, ErrTopicMissing) || !strings.Contains(rs[1].String(),
		"dead-letter topic dlq-five: missing, and the brokers refused to create it with 2 partitions and replication factor 5: INVALID_REPLICATION_FACTOR") {
		t.Fatalf("replication factor 5 on 3 brokers: %v\n%v", err, rs)
	}
}

// TestCreateTopicsBadInput: bad options and a Config New refuses are
// ErrConfig errors naming what is wrong, before any broker is asked.
func TestCreateTopicsBadInput(t *testing.T) {
	ok := Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"a"}, DeadLetterTopic: "d"}
	parkOn := ok
	parkOn.Topics, parkOn.Park.Enabled = []string{"a", "a.park"}, true
	noGroup := ok
	noGroup.Group = ""
	for _, tc := range []struct {
		cfg  Config
		opts []TopicOption
		want string
	}{
		{ok, []TopicOption{TopicsReplicationFactor(0)}, "TopicsReplicationFactor: 0"},
		{ok, []TopicOption{TopicsReplicationFactor(-2)}, "TopicsReplicationFactor: -2"},
		{ok, []TopicOption{TopicsDeadLetterPartitions(0)}, "TopicsDeadLetterPartitions: 0"},
		{ok, []TopicOption{TopicsCreateConsumed(-1)}, "TopicsCreateConsumed: -1"},
		{Config{Brokers: ok.Brokers, Group: "g", DeadLetterTopic: "d"}, nil, "Topics"},
		{noGroup, nil, "Group"},
		{parkOn, nil, `the park topic "a.park" of "a" is also a consumed topic`},
	} {
		for _, run := range []func(context.Context, Config, ...TopicOption) ([]TopicResult, error){CreateTopics, CheckTopics} {
			rs, err := run(context.Background(), tc.cfg, tc.opts...)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) || rs != nil {
				t.Errorf("%+v: %v %v, want an ErrConfig error with %q", tc.cfg, rs, err, tc.want)
			}
		}
	}
}

// TestCreateTopicsRace: a topic created by someone else between the look
// and the create (the broker answers TOPIC_ALREADY_EXISTS) is checked as
// it is: ok when it fits, wrong when it does not.
func TestCreateTopicsRace(t *testing.T) {
	e, _ := topicsEnv(t, 1, map[string]int32{"orders": 4, "orders.park": 4, "chats": 4, "chats.park": 2})
	run, err := newTopicRun(topicsConfig(e, "orders", "chats"), true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer run.cl.Close()
	for _, tc := range []struct{ source, want string }{{"orders", "ok"}, {"chats", "wrong"}} {
		r := TopicResult{Topic: tc.source + ".park", Kind: TopicPark, Source: tc.source}
		check := func(r *TopicResult, info topicInfo) { run.checkPark(r, info, 4) }
		got, err := run.ensure(context.Background(), r, topicInfo{}, 4, deletePolicy(), check) // topicInfo{}: seen missing
		if err != nil || string(got.State) != tc.want {
			t.Errorf("%s: %v %s, want %s", r.Topic, err, got, tc.want)
		}
	}
}

// TestCreateTopicsConcurrent: two runs at once both succeed, and every
// topic is created by exactly one of them.
func TestCreateTopicsConcurrent(t *testing.T) {
	e, _ := topicsEnv(t, 1, map[string]int32{"orders": 3, "chats": 2})
	cfg := topicsConfig(e, "orders", "chats")
	var wg sync.WaitGroup
	results := make([][]TopicResult, 2)
	errs := make([]error, 2)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = CreateTopics(context.Background(), cfg) })
	}
	wg.Wait()
	created := map[string]int{}
	for i, rs := range results {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		for _, r := range rs {
			if r.State == TopicCreated {
				created[r.Topic]++
			}
		}
	}
	for _, name := range []string{"svc-dlq", "orders.park", "chats.park"} {
		if created[name] != 1 {
			t.Errorf("%s created %d times", name, created[name])
		}
	}
}

// TestCreateTopicsUnreachable: brokers that do not answer end the call
// with an error naming them when ctx ends, and no results.
func TestCreateTopicsUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cfg := Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"a"}, DeadLetterTopic: "d"}
	rs, err := CheckTopics(ctx, cfg)
	if err == nil || rs != nil || !strings.Contains(err.Error(), "on brokers 127.0.0.1:1") {
		t.Fatalf("%v %v, want an error naming the brokers", rs, err)
	}
}
