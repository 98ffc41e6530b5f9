package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/lanestest"
)

// faultRun is one broker-fault scenario's run: a topic of 6 partitions
// (replication factor 3, min.insync.replicas 2), 60 sessions produced
// under load while three consumer members handle them, every message in a
// Ledger.
type faultRun struct {
	fc         *faultCluster
	l          *lanestest.Ledger
	topic, dlq string
	group      string
	out        string // the output topic of a transactional run ("": none)
	sessions   []string
	per        int // messages per session: at most, then (finish) as sent
	total      int
	ld         *load
	start      time.Time
}

// runShape: at most per messages per session (the scenario may stop the
// load sooner), a round of sends every pace, and the consumer members
// in-process (0: the scenario runs its own); tx runs them in the
// transactional mode, each input with outputsPer outputs to an output
// topic (exactlyonce_test.go), every input's outputs checked at the end.
type runShape struct {
	per     int
	pace    time.Duration
	members int
	tx      bool
}

func (fc *faultCluster) begin(t *testing.T, name string, shape runShape) *faultRun {
	t.Helper()
	topic, dlq := fc.topics(t, 6)
	r := &faultRun{fc: fc, l: lanestest.NewLedger(), topic: topic, dlq: dlq, group: groupName(name),
		sessions: sessionNames(60), per: shape.per, start: time.Now()}
	r.total = len(r.sessions) * r.per
	f := faults{transient: 0.02, work: 2 * time.Millisecond}
	if shape.tx {
		r.out = fc.outputTopic(t, topic)
	}
	for i := 1; i <= shape.members; i++ {
		m := fmt.Sprintf("m%d", i)
		cfg := fc.consumerConfig(name, topic, dlq)
		cfg.ClientOptions = append(cfg.ClientOptions, faultConsumerOpts()...)
		h := handler(m, r.l, f)
		if shape.tx {
			cfg.CommitInterval = 100 * time.Millisecond
			cfg.Transactions = consumer.TransactionPolicy{Enabled: true, ID: r.group + "-" + m}
			h = r.l.Handler(m, txHandler(r.out, f))
		}
		startMember(t, m, cfg, h)
	}
	r.ld = fc.startLoad(t, topic, r.sessions, r.per, shape.pace, r.l)
	return r
}

// progress waits until n more messages are accounted for (or all are),
// for at most limit: the group makes progress in the current state.
func (r *faultRun) progress(t *testing.T, n int, limit time.Duration, state string) {
	t.Helper()
	from := r.l.Accounted()
	began := time.Now()
	waitAccounted(t, r.l, min(from+n, r.total), limit, "progress "+state)
	t.Logf("%s: %d more messages finished in %v (%d of %d)", state, r.l.Accounted()-from,
		time.Since(began).Round(time.Millisecond), r.l.Accounted(), r.total)
}

// sleepUntil lets time pass under a fault (not a synchronisation: what
// the scenario waits for afterwards, it polls for).
func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }

// finish stops the load, waits until the producer is done and every
// message is accounted for, checks the log and the ledger, and logs the
// fault's figures.
func (r *faultRun) finish(t *testing.T, fault string) {
	t.Helper()
	r.ld.stop()
	r.ld.wait(t, 4*time.Minute)
	r.per = r.ld.rounds
	r.total = len(r.sessions) * r.per
	waitAccounted(t, r.l, r.total, 4*time.Minute, "after "+fault)
	r.fc.readDLQ(t, r.dlq, r.l)
	r.fc.checkLog(t, r.topic, r.sessions, r.per)
	faultReport(t, r.fc.cluster, fault, r.l, time.Since(r.start))
	if r.out != "" {
		waitLagZero(t, r.fc.cluster, r.group, r.topic, 2*time.Minute)
		checkExactlyOnce(t, r.fc.cluster, r.out, r.total)
	}
}
