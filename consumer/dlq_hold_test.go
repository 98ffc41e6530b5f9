package consumer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/lanesdev/lanes/consumer/internal/offsets"
)

// TestFailedDLQWriteHoldsPartition: while the dead-letter topic cannot be
// written (it does not exist), the poison record's offset is not done: the
// watermark stays at it although every later record finished, and after
// shutdown nothing past it is committed. Progress is never bought with data,
// and Run says so: ErrUnfinished names the partition and the failing write.
func TestFailedDLQWriteHoldsPartition(t *testing.T) {
	e := newEnv(t, 1, "chats")
	e.produceValues("chats", "a|0", "b|0", "b|1", "b|2") // offsets 0..3
	rec := newRecorder(4, func(ctx context.Context, m *Message) error {
		if string(m.Record.Value) == "a|0" {
			return Permanent(errors.New("poison"))
		}
		return nil
	})
	cfg := e.config("g-dlq-hold", "chats")
	cfg.DeadLetterTopic = "missing-dlq"
	cfg.CommitTimeout = 300 * time.Millisecond // each failed write gives up quickly
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	rec.wait(t)
	eventually(t, "failed DLQ writes", func() bool { return c.Stats().DeadLetterFailures >= 2 })
	ps := c.Stats().Partitions[0]
	if ps.Watermark != 0 || ps.Committed > 0 || c.Stats().DeadLettered != 0 {
		t.Fatalf("watermark %d, committed %d, DLQ %d while the DLQ write fails; want 0, <=0, 0",
			ps.Watermark, ps.Committed, c.Stats().DeadLettered)
	}
	err = stop()
	if !errors.Is(err, ErrUnfinished) || !strings.Contains(err.Error(), "chats/0") || !strings.Contains(err.Error(), "dead-letter") {
		t.Fatalf("Run: %v; want ErrUnfinished naming chats/0 and its failing dead-letter write", err)
	}
	offs, err := kadm.NewClient(e.client()).FetchOffsets(context.Background(), "g-dlq-hold")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("chats", 0); ok && o.At > 0 {
		t.Fatalf("committed %d past the record whose DLQ write never succeeded", o.At)
	}
}

// TestForeignMetadataNotTrusted: a committed offset whose metadata is not
// lanes' (another client's), or is lanes' but written for another offset,
// is honoured as an offset and nothing above it is skipped.
func TestForeignMetadataNotTrusted(t *testing.T) {
	for _, tc := range []struct{ name, meta string }{
		{"foreign", "consumer-7f3a-member-id"},
		{"written for another offset", offsets.EncodeMetadata(1, []offsets.Range{{Start: 3, End: 5}}, 4096)},
		{"corrupt", "lanes1:!!notbase64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1, "chats", "dlq")
			e.produce("chats", sessionNames(8), 1) // offsets 0..7
			group := "g-foreign"
			adm := kadm.NewClient(e.client())
			offs := kadm.Offsets{}
			offs.Add(kadm.Offset{Topic: "chats", Partition: 0, At: 2, LeaderEpoch: -1, Metadata: tc.meta})
			if _, err := adm.CommitOffsets(context.Background(), group, offs); err != nil {
				t.Fatal(err)
			}
			rec := newRecorder(6, nil)
			c := runAll(t, e.config(group, "chats"), rec, 0)
			seen := map[int64]bool{}
			for _, call := range rec.snapshot() {
				seen[call.offset] = true
			}
			for o := int64(0); o < 8; o++ {
				if seen[o] != (o >= 2) {
					t.Errorf("offset %d handled=%v; want every offset from the committed 2 on, none below", o, seen[o])
				}
			}
			if c.Stats().SkippedDone != 0 {
				t.Errorf("SkippedDone = %d from untrusted metadata", c.Stats().SkippedDone)
			}
		})
	}
}
