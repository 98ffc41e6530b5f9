package consumer

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/parkwire"
)

// The park write: an entry of a park partition written until it is
// acknowledged or its partition fenced (parkWrite); a copy that could not
// fit its park topic's max.message.bytes written as a stub, and logged
// (logStub; the fitting is parkIO.fit,
// https://github.com/lanesdev/lanes/blob/main/docs/parking.md#limits); a
// failing write shown in PartitionStats, readiness and the log
// (park_fails.go), like a failing dead-letter write.

// parkWriteFailed reports a failed write of park entry rec of partition p
// (id: its entry among p's failing writes, 0 for a first failure) in
// Stats and readiness, and in the log at most once per park partition per
// logRepeatEvery; it returns the write's id.
func (c *Consumer) parkWriteFailed(p *partition, rec *kgo.Record, id uint64, err error) uint64 {
	now := time.Now()
	id, since := p.parkWrites.failed(id, fmt.Sprintf("write to %s/%d: %v", rec.Topic, rec.Partition, err), now)
	if ok, n := c.parkLog.allow("write "+rec.Topic+"/"+strconv.FormatInt(int64(rec.Partition), 10), now); ok {
		c.log().Error().Err(err).Str("topic", p.key.topic).Int32("partition", p.key.partition).
			Str("park_topic", rec.Topic).Str("park_kind", string(parkwire.Value(rec, parkwire.HeaderKind))).
			Stringer("failing_for", now.Sub(since)).Int("suppressed", n).
			Msg("park: write to the park topic failed; retrying: what waits for it holds the partition meanwhile (PartitionStats.Park.WriteError and readiness say so); check that the park topic exists, accepts this member's writes and its max.message.bytes")
	}
	return id
}

// parkWriteRecovered ends write id's failure once it succeeded.
func (c *Consumer) parkWriteRecovered(p *partition, rec *kgo.Record, id uint64) {
	p.parkWrites.ended(id)
	c.log().Info().Str("topic", p.key.topic).Int32("partition", p.key.partition).Str("park_topic", rec.Topic).
		Msg("park: write to the park topic succeeded after failures")
}

// parkWrite writes rec until acknowledged, or until p is fenced (false).
// A failing write shows in Stats, readiness and the log (parkWriteFailed); a
// parked copy refused as too large is written as its stub instead.
func (c *Consumer) parkWrite(p *partition, rec *kgo.Record) (int64, bool) {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval, bo.MaxInterval, bo.MaxElapsedTime = c.cfg.Retry.InitialInterval, c.cfg.Retry.MaxInterval, 0
	var failing uint64 // this write among p's failing park writes; 0 while it has not failed
	defer func() { p.parkWrites.ended(failing) }()
	for {
		ctx, cancel := context.WithTimeout(p.attempts, c.cfg.CommitTimeout)
		off, err := c.park.write(ctx, rec)
		cancel()
		if err == nil {
			if failing != 0 {
				c.parkWriteRecovered(p, rec, failing)
			}
			return off, true
		}
		if p.isFenced() {
			return 0, false
		}
		if stub := parkwire.StubFor(rec, err); stub != nil {
			c.logStub(rec, 0, 0, err)
			rec = stub
			continue
		}
		failing = c.parkWriteFailed(p, rec, failing, err)
		if !p.waitRetry(parkSeq, bo.NextBackOff()) {
			return 0, false
		}
	}
}

// logStub warns that park copy cp is written as a stub.
func (c *Consumer) logStub(cp *kgo.Record, size, limit int, cause error) {
	ev := c.log().Warn().Str("topic", string(parkwire.Value(cp, parkwire.HeaderTopic))).
		Str("partition", string(parkwire.Value(cp, parkwire.HeaderPartition))).Str("offset", string(parkwire.Value(cp, parkwire.HeaderOffset))).
		Str("session", string(parkwire.Value(cp, parkwire.HeaderSession))).Str("park_topic", cp.Topic)
	if cause != nil {
		ev = ev.AnErr("cause", cause)
	} else {
		ev = ev.Int("copy_bytes", size).Int("park_max_message_bytes", limit)
	}
	ev.Msg("park: record too large for its park topic: parked as a stub (its key and provenance, without its value and headers); its retry reads it from its source partition, so keep the source topic's retention longer than the park delays plus an outage, or raise the park topic's max.message.bytes to park such records whole")
}
