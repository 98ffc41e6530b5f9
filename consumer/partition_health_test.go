package consumer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// admitOffsets fetches offsets into p and returns their sequence numbers.
func admitOffsets(p *partition, offsets ...int64) []uint64 {
	recs := make([]*kgo.Record, len(offsets))
	for i, o := range offsets {
		recs[i] = &kgo.Record{Topic: p.key.topic, Partition: p.key.partition, Offset: o}
	}
	var seqs []uint64
	p.admit(recs, offsets[len(offsets)-1]+1, nil, func(_ int, seq uint64) { seqs = append(seqs, seq) })
	for _, seq := range seqs {
		p.start(seq) // queued → running, as a lane does
	}
	return seqs
}

// TestDeadLetterFailureClearsWhenDone: a failed dead-letter write is
// reported only while its record is not done, whichever path makes it
// done; a failure reported after the record is done records nothing; with
// two records failing the lower offset is reported, and the other once the
// lower one is done.
func TestDeadLetterFailureClearsWhenDone(t *testing.T) {
	down := errors.New("TOPIC_AUTHORIZATION_FAILED")
	now := time.Now()
	blocked := func(p *partition) (int64, string) {
		ps := p.stats(now)
		return ps.DeadLetterBlockedAt, ps.DeadLetterError
	}
	for _, tc := range []struct {
		name string
		done func(p *partition, seq uint64)
	}{
		{"handled", func(p *partition, seq uint64) { p.finish(seq, true) }},
		{"dead-lettered by the other writer", func(p *partition, seq uint64) { p.markDone(seq) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPartition(context.Background(), partKey{"chats", 0}, 1, 1<<20, nil)
			seqs := admitOffsets(p, 0, 1, 2)
			if !p.dlqFailure(seqs[2], 2, down, now) || p.dlqFailure(seqs[2], 2, down, now) {
				t.Fatal("first / repeated failure of offset 2 not told apart")
			}
			if !p.dlqFailure(seqs[1], 1, down, now) {
				t.Fatal("offset 1's first failure not first")
			}
			if at, err := blocked(p); at != 1 || err != down.Error() {
				t.Fatalf("blocked at %d (%q), want 1", at, err)
			}
			tc.done(p, seqs[1])
			if at, _ := blocked(p); at != 2 {
				t.Fatalf("blocked at %d once offset 1 is done, want 2", at)
			}
			tc.done(p, seqs[2])
			if at, err := blocked(p); at != -1 || err != "" {
				t.Fatalf("blocked at %d (%q) once every failing record is done", at, err)
			}
			if p.dlqFailure(seqs[2], 2, down, now) {
				t.Fatal("a failure of a done record counted as first")
			}
			if at, _ := blocked(p); at != -1 {
				t.Fatalf("a failure of a done record recorded: blocked at %d", at)
			}
		})
	}
}

// TestDeadLetterFailureTruncated: a record whose dead-letter write fails
// is retired by a log truncation; the record now at its offset is another
// one (another sequence number): the old failure is gone, and a failure of
// the new record is its first.
func TestDeadLetterFailureTruncated(t *testing.T) {
	p := newPartition(context.Background(), partKey{"chats", 0}, 1, 1<<20, nil)
	now := time.Now()
	old := admitOffsets(p, 0, 1, 2)
	p.finish(old[0], true)
	p.dlqFailure(old[1], 1, errors.New("MESSAGE_TOO_LARGE"), now)
	reused := admitOffsets(p, 1) // the log was truncated at 1
	if ps := p.stats(now); ps.DeadLetterBlockedAt != -1 || ps.DeadLetterError != "" {
		t.Fatalf("blocked at %d (%q) by a record the truncation retired", ps.DeadLetterBlockedAt, ps.DeadLetterError)
	}
	if !p.dlqFailure(reused[0], 1, errors.New("MESSAGE_TOO_LARGE"), now) {
		t.Fatal("the new record at offset 1: its failure is not its first")
	}
	if ps := p.stats(now); ps.DeadLetterBlockedAt != 1 {
		t.Fatalf("blocked at %d, want 1", ps.DeadLetterBlockedAt)
	}
}

// TestDeadLetterCutThenFailed: a dead-letter write that the shutdown cut
// (not a failure: only named as unfinished) and that then fails for real
// (the stall skipper's, cut, then the lane's own) is reported as failing:
// a cut once hid the failure from Stats and Health for good. A record is
// counted blocked once, at its first failure that is not retriable,
// whatever failed before it.
func TestDeadLetterCutThenFailed(t *testing.T) {
	p := newPartition(context.Background(), partKey{"chats", 0}, 1, 1<<20, nil)
	now := time.Now()
	seqs := admitOffsets(p, 0)
	p.dlqCut(seqs[0], 0, now)
	if off, ok := p.deadLetterCut(); !ok || off != 0 {
		t.Fatalf("cut at %d (%v), want 0", off, ok)
	}
	if ps := p.stats(now); ps.DeadLetterBlockedAt != -1 {
		t.Fatalf("a cut write reported failing at %d", ps.DeadLetterBlockedAt)
	}
	p.dlqFailure(seqs[0], 0, errors.New("TOPIC_AUTHORIZATION_FAILED"), now)
	if ps := p.stats(now); ps.DeadLetterBlockedAt != 0 || ps.DeadLetterError != "TOPIC_AUTHORIZATION_FAILED" {
		t.Fatalf("blocked at %d (%q) after the cut write failed; want 0", ps.DeadLetterBlockedAt, ps.DeadLetterError)
	}
	if _, ok := p.deadLetterCut(); ok {
		t.Fatal("a write that failed after its cut is still named as cut")
	}
	if !p.dlqBlocked(seqs[0]) || p.dlqBlocked(seqs[0]) {
		t.Fatal("a record counted blocked other than once")
	}
}

// TestCommitFailureClears: a partition's failed commit is reported until a
// commit of it succeeds, or it has nothing left to commit.
func TestCommitFailureClears(t *testing.T) {
	now := time.Now()
	p := newPartition(context.Background(), partKey{"chats", 0}, 1, 1<<20, nil)
	seqs := admitOffsets(p, 0)
	p.finish(seqs[0], true)
	cp, ok := p.toCommit(0)
	if !ok {
		t.Fatal("nothing to commit")
	}
	p.commitFailed(errors.New("first"), now.Add(-time.Minute))
	p.commitFailed(errors.New("second"), now)
	if ps := p.stats(now); ps.CommitError != "second" || ps.CommitFailingFor != time.Minute {
		t.Fatalf("commit error %q for %v, want the last error, failing since the first", ps.CommitError, ps.CommitFailingFor)
	}
	p.committedAt(cp)
	if ps := p.stats(now); ps.CommitError != "" {
		t.Fatalf("commit error %q after a success", ps.CommitError)
	}

	p.commitFailed(errors.New("lost"), now)
	if _, ok := p.toCommit(0); ok {
		t.Fatal("a commit due although the last one says everything")
	}
	if ps := p.stats(now); ps.CommitError != "" {
		t.Fatalf("commit error %q with nothing left to commit", ps.CommitError)
	}
}

// TestCommitFailures: a request error fails every partition asked; a
// response fails the partitions it gives an error, and those it does not
// mention; v10+ responses name topics by ID only.
func TestCommitFailures(t *testing.T) {
	asked := map[partKey]string{{"chats", 0}: "", {"chats", 3}: "", {"other", 0}: ""}
	f := refusedCommits(nil, nil, errors.New("connection dropped"), asked)
	if len(f) != 3 || !errors.Is(f[partKey{"chats", 3}], ErrCommit) || !strings.Contains(f[partKey{"other", 0}].Error(), "connection dropped") {
		t.Fatalf("request error: %v", f)
	}

	id := [16]byte{1}
	req := &kmsg.OffsetCommitRequest{Topics: []kmsg.OffsetCommitRequestTopic{{Topic: "chats", TopicID: id}, {Topic: "other"}}}
	resp := &kmsg.OffsetCommitResponse{Topics: []kmsg.OffsetCommitResponseTopic{{TopicID: id, Partitions: []kmsg.OffsetCommitResponseTopicPartition{
		{Partition: 0}, {Partition: 3, ErrorCode: kerr.TopicAuthorizationFailed.Code},
	}}}}
	f = refusedCommits(req, resp, nil, asked)
	if len(f) != 2 || !errors.Is(f[partKey{"chats", 3}], kerr.TopicAuthorizationFailed) || f[partKey{"other", 0}] == nil {
		t.Fatalf("per-partition errors: %v; want chats/3 refused, other/0 unanswered", f)
	}
	err := commitError(f)
	if !errors.Is(err, ErrCommit) || !strings.Contains(err.Error(), "chats partition 3") || !strings.Contains(err.Error(), "other partition 0") {
		t.Fatalf("commit error %q does not name each partition", err)
	}

	resp.Topics[0].Partitions[1].ErrorCode = 0
	resp.Topics = append(resp.Topics, kmsg.OffsetCommitResponseTopic{Topic: "other", Partitions: []kmsg.OffsetCommitResponseTopicPartition{{Partition: 0}}})
	if f := refusedCommits(req, resp, nil, asked); f != nil {
		t.Fatalf("every partition acknowledged: %v", f)
	}
}

// TestCommitReason: the reason names each failing partition, since when
// the first fails, and each distinct error once.
func TestCommitReason(t *testing.T) {
	now := time.Date(2026, 11, 30, 22, 5, 0, 0, time.UTC)
	parts := []PartitionStats{
		{Topic: "chats", Partition: 0, CommitError: "consumer: commit failed: dropped", CommitFailingFor: 2 * time.Minute},
		{Topic: "chats", Partition: 1},
		{Topic: "chats", Partition: 3, CommitError: "consumer: commit failed: dropped", CommitFailingFor: time.Minute},
	}
	want := "commits failing for chats/0, chats/3 since 2026-11-30T22:03:00Z: consumer: commit failed: dropped"
	if got := commitReason(parts, now); got != want {
		t.Fatalf("reason %q\nwant   %q", got, want)
	}
	if got := commitReason(parts[1:2], now); got != "" {
		t.Fatalf("reason %q with no failing partition", got)
	}
}
