package consumer

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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
			p := newPartition(partKey{"chats", 0}, 1, 1<<20, nil)
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
	p := newPartition(partKey{"chats", 0}, 1, 1<<20, nil)
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
