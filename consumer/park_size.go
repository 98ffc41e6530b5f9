package consumer

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/parkset"

	"github.com/lanesdev/lanes/consumer/internal/parkwire"
)

// Park copies of large records
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#limits), as
// the member meets them: the park topic's limit learned at its check, the
// copy fitted (parkwire.Fit), a stub logged and read back from its source.

// learnLimit takes park topic's max.message.bytes from its configs (the
// check's DescribeTopicConfigs answer); a value missing or unreadable
// leaves Kafka's default.
func (io *parkIO) learnLimit(topic, value string) {
	if n, err := strconv.Atoi(value); err == nil && n > 0 {
		io.limits.Learn(topic, n)
	}
}

// fit returns park copy cp as it is to be written under its park topic's
// limit (parkwire.Fit), with its size bound and that limit.
func (io *parkIO) fit(cp *kgo.Record) (rec *kgo.Record, stub bool, size, limit int) {
	limit = io.limits.Limit(cp.Topic)
	rec, stub, size = parkwire.Fit(cp, limit)
	return rec, stub, size, limit
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

// readStub reads the record whose stub is parked head h (stub as parsed)
// from its source partition. A record gone from it, or another record at
// its offset (the source topic made again), is errRecordGone: its loss is
// dead-lettered (parkLost).
func (c *Consumer) readStub(ctx context.Context, p *partition, h parkset.Record, stub *kgo.Record) (*kgo.Record, error) {
	r, _, err := c.park.readAt(ctx, p.key.topic, p.key.partition, h.SrcOffset)
	if err != nil {
		return nil, fmt.Errorf("parked stub (park offset %d): read its record from %s/%d at %d: %w",
			h.ParkOffset, p.key.topic, p.key.partition, h.SrcOffset, err)
	}
	if !bytes.Equal(r.Key, stub.Key) {
		return nil, fmt.Errorf("%w: parked stub (park offset %d): %s/%d at %d holds a record of another key than the stub's: the topic was made again",
			errRecordGone, h.ParkOffset, p.key.topic, p.key.partition, h.SrcOffset)
	}
	return r, nil
}
