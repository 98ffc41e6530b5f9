package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lanesdev/lanes/integration/internal/clusterinfo"
	"github.com/lanesdev/lanes/lanestest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The broker-fault scenarios run on kafka.sh's three-node cluster
// (LANES_KAFKA_NODES=3, set by `kafka.sh env` in cluster mode and by make
// test-cluster) and skip otherwise. Node N of the cluster has node.id N.

// faultCluster is the three-node cluster and the script that starts,
// stops and kills its nodes.
type faultCluster struct {
	*cluster
	script string
	admin  *kgo.Client
}

func newFaultCluster(t *testing.T) *faultCluster {
	t.Helper()
	if os.Getenv("LANES_KAFKA_NODES") != "3" || os.Getenv("LANES_BROKERS") == "" {
		t.Skip("broker faults need kafka.sh's three-node cluster (make test-cluster, or LANES_KAFKA_NODES=3 kafka.sh start and its env)")
	}
	script := os.Getenv("LANES_KAFKA_SH")
	if script == "" {
		var err error
		if script, err = filepath.Abs("kafka/kafka.sh"); err != nil {
			t.Fatal(err)
		}
	}
	fc := &faultCluster{cluster: newCluster(t), script: script}
	fc.admin = fc.client(t)
	t.Cleanup(fc.admin.Close)
	// A test that failed half-way must not leave the next one a node down.
	t.Cleanup(func() {
		for n := int32(1); n <= 3; n++ {
			if out, err := fc.run("start-node", n); err != nil {
				t.Errorf("kafka.sh start-node %d: %v\n%s", n, err, out)
			}
		}
	})
	fc.waitReplicated(t, 3*time.Minute)
	return fc
}

func (fc *faultCluster) run(cmd string, node int32) ([]byte, error) {
	c := exec.Command(fc.script, cmd, strconv.Itoa(int(node)))
	c.Env = append(os.Environ(), "LANES_KAFKA_NODES=3")
	return c.CombinedOutput()
}

// node runs kafka.sh cmd N (stop-node, kill-node, start-node).
func (fc *faultCluster) node(t *testing.T, cmd string, node int32) {
	t.Helper()
	began := time.Now()
	if out, err := fc.run(cmd, node); err != nil {
		t.Fatalf("kafka.sh %s %d: %v\n%s", cmd, node, err, out)
	}
	t.Logf("kafka.sh %s %d (%v)", cmd, node, time.Since(began).Round(time.Millisecond))
}

// poll calls f every 250 ms until it returns true, failing after limit.
func poll(t *testing.T, what string, limit time.Duration, f func(ctx context.Context) (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ok, err := f(ctx)
		cancel()
		if ok {
			return
		}
		last = err
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v (last: %v)", what, limit, last)
		}
		time.Sleep(250 * time.Millisecond) // polling the cluster: no signal to wait on
	}
}

// waitReplicated waits until every partition of the cluster has all its
// replicas in sync: a node that came back has caught up.
func (fc *faultCluster) waitReplicated(t *testing.T, limit time.Duration) {
	t.Helper()
	poll(t, "every partition fully replicated", limit, func(ctx context.Context) (bool, error) {
		under, err := clusterinfo.UnderReplicated(ctx, fc.admin)
		if err == nil && len(under) > 0 {
			err = fmt.Errorf("under-replicated: %v", under)
		}
		return err == nil, err
	})
}

// leader returns the node leading topic's partition, waiting for one.
func (fc *faultCluster) leader(t *testing.T, topic string, p int32) int32 {
	t.Helper()
	var id int32
	poll(t, fmt.Sprintf("a leader for %s/%d", topic, p), time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		id, err = clusterinfo.Leader(ctx, fc.admin, topic, p)
		return err == nil, err
	})
	return id
}

// coordinator returns the node coordinating group, waiting for one.
func (fc *faultCluster) coordinator(t *testing.T, group string) int32 {
	t.Helper()
	var id int32
	poll(t, "the coordinator of group "+group, time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		id, err = clusterinfo.GroupCoordinator(ctx, fc.admin, group)
		return err == nil, err
	})
	return id
}

// ledBy returns the partitions of topic that node leads.
func (fc *faultCluster) ledBy(t *testing.T, topic string, node int32) []int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leaders, err := clusterinfo.Leaders(ctx, fc.admin, topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	for p, l := range leaders {
		if l == node {
			out = append(out, p)
		}
	}
	return out
}

// topics creates a topic and its DLQ replicated on all three nodes with
// min.insync.replicas=2 (as the cluster's defaults, said explicitly).
func (fc *faultCluster) topics(t *testing.T, partitions int32) (topic, dlq string) {
	t.Helper()
	topic = fmt.Sprintf("it-%s-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), time.Now().UnixNano())
	dlq = topic + "-dlq"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	minISR := "2"
	resps, err := kadm.NewClient(fc.admin).CreateTopics(ctx, partitions, 3, map[string]*string{"min.insync.replicas": &minISR}, topic, dlq)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatalf("create topics %s, %s: %v", topic, dlq, err)
	}
	return topic, dlq
}

// outputTopic makes topic's output topic for a transactional run, as
// topics makes its own: 6 partitions, replication factor 3,
// min.insync.replicas 2.
func (fc *faultCluster) outputTopic(t *testing.T, topic string) string {
	t.Helper()
	out := topic + "-out"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	minISR := "2"
	resps, err := kadm.NewClient(fc.admin).CreateTopics(ctx, 6, 3, map[string]*string{"min.insync.replicas": &minISR}, out)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", out, err)
	}
	return out
}

// faultConsumerOpts: members notice a dead member or a lost coordinator in
// seconds (KIP-848 groups take the same 6 s and 500 ms from kafka.sh).
func faultConsumerOpts() []kgo.Opt {
	return []kgo.Opt{kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(500 * time.Millisecond)}
}

// waitAccounted waits until n messages are accounted for in l, failing
// after limit without that.
func waitAccounted(t *testing.T, l *lanestest.Ledger, n int, limit time.Duration, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := l.WaitAccounted(ctx, n); err != nil {
		t.Fatalf("%s: %d of %d accounted for: %v", what, l.Accounted(), n, err)
	}
}

// faultReport checks the ledger and logs one line per fault for
// docs/testing.md: duplicates are redeliveries the fault caused.
func faultReport(t *testing.T, c *cluster, fault string, l *lanestest.Ledger, took time.Duration) {
	t.Helper()
	r := l.Report()
	t.Logf("FAULT %s [%s]: %d messages, %d calls, %d duplicates, %d lost, %d violations, %d overlaps, %d regressions, %v",
		fault, groupProtocol(), r.Messages, r.Calls, r.Duplicates, r.Lost, r.Violations, r.Overlaps, r.Regressions, took.Round(time.Second))
	assertClean(t, c, r, took, true)
}
