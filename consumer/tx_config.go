package consumer

import (
	"crypto/rand"
	"fmt"
	"time"

	"github.com/lanesdev/lanes/hashring"
)

// TransactionPolicy turns on exactly-once pipelines
// (https://github.com/lanesdev/lanes/blob/main/docs/exactly-once.md): a
// handler's output records (Message.Output) and the commit of its input's
// offset go into one Kafka transaction, so a read_committed reader sees an
// input's outputs exactly when its offset is committed, never part of
// them, and never twice after a crash, a rebalance or a rolling deploy.
// One transaction per CommitInterval carries every session's completed
// inputs. The zero value is off.
type TransactionPolicy struct {
	// Enabled turns the transactional mode on.
	Enabled bool
	// ID is the member's transactional ID. Give each member its own, kept
	// across restarts (a StatefulSet's pod name): a member that restarts
	// under its ID ends its former self's open transaction at once. With
	// a new ID each start, a crashed member's open transaction holds the
	// read_committed readers of what it wrote until Timeout passes.
	// Default: the group, "-tx-" and a random suffix.
	ID string
	// Timeout is the transaction timeout: the broker aborts a transaction
	// of this member left open longer. A transaction stays open one
	// CommitInterval (a handler's run does not keep it open: its outputs
	// wait with it until it returns), so Timeout must exceed
	// CommitInterval. Default: [DefaultTransactionTimeout].
	Timeout time.Duration
	// Outputs places output records on their topic's partitions by key:
	// hashring.SchemeKafka (murmur2, the lanes producer's default) or
	// hashring.SchemeJump (the producer's PartitionJump). Use the scheme
	// of the producers that write the output topics, so a session's
	// records land on one partition whoever writes them. Default:
	// hashring.SchemeKafka.
	Outputs hashring.Scheme
}

// DefaultTransactionTimeout is TransactionPolicy.Timeout's default.
const DefaultTransactionTimeout = 30 * time.Second

// withDefaults checks p and fills in its defaults: group is the
// consumer's group (the default ID's prefix), interval its CommitInterval.
// What else of the Config it rules out, validateTransactions checks.
func (p TransactionPolicy) withDefaults(group string, interval time.Duration) (TransactionPolicy, error) {
	bad := func(field, why string) (TransactionPolicy, error) {
		return p, fmt.Errorf("%w: Transactions.%s: %s", ErrConfig, field, why)
	}
	switch {
	case p.Timeout < 0:
		return bad("Timeout", fmt.Sprintf("must not be negative, got %v", p.Timeout))
	case p.Outputs != 0 && p.Outputs != hashring.SchemeKafka && p.Outputs != hashring.SchemeJump:
		return bad("Outputs", fmt.Sprintf("unknown scheme %d (hashring.SchemeKafka or hashring.SchemeJump)", p.Outputs))
	}
	orDefault(&p.Timeout, DefaultTransactionTimeout)
	if p.Timeout <= interval {
		return bad("Timeout", fmt.Sprintf("%v must exceed CommitInterval (%v): a transaction stays open one interval", p.Timeout, interval))
	}
	if p.Outputs == 0 {
		p.Outputs = hashring.SchemeKafka
	}
	if p.ID == "" {
		p.ID = group + "-tx-" + rand.Text()[:12]
	}
	return p, nil
}
