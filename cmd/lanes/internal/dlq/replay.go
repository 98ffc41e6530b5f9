package dlq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/hashring"
)

// dlqHeaders are the headers the consumer adds to a dead-lettered record;
// replay removes them.
var dlqHeaders = map[string]bool{
	consumer.HeaderDLQTopic: true, consumer.HeaderDLQPartition: true, consumer.HeaderDLQOffset: true,
	consumer.HeaderDLQError: true, consumer.HeaderDLQAttempts: true, consumer.HeaderDLQReason: true,
}

// Selection is which dead letters a replay sends, and where.
type Selection struct {
	To                     string   // the target topic ("": each record's source topic)
	Reasons, SkipReasons   []string // by lanes-dlq-reason
	Sessions, SkipSessions []string // by key
}

// picks reports whether r is selected.
func (s Selection) picks(r *kgo.Record) bool {
	why, _ := eventid.Header(r, consumer.HeaderDLQReason)
	session := string(r.Key)
	return (len(s.Reasons) == 0 || slices.Contains(s.Reasons, why)) && !slices.Contains(s.SkipReasons, why) &&
		(len(s.Sessions) == 0 || slices.Contains(s.Sessions, session)) && !slices.Contains(s.SkipSessions, session)
}

// group is the consumer group a replay of s from dlq keeps its progress
// in: one per selection, so that the same command run again goes on
// where it stopped, and another selection starts from the beginning.
func (s Selection) group(dlq string) string {
	h := sha256.New()
	for _, part := range [][]string{{s.To}, s.Reasons, s.SkipReasons, s.Sessions, s.SkipSessions} {
		fmt.Fprintf(h, "%q;", part)
	}
	return "lanes-replay." + dlq + "." + hex.EncodeToString(h.Sum(nil))[:12]
}

// replayRun is one replay: its flags, its client, its progress.
type replayRun struct {
	f        dlqFlags
	w        io.Writer
	sel      Selection
	group    string
	gap      time.Duration // between two records sent (0: no cap)
	every    time.Duration // progress lines
	cl       *kgo.Client
	next     map[int32]int64 // per DLQ partition, the offset after the last record replayed
	sent     int
	lastSave time.Time
}

// replay sends the selected records back to their source topic (or
// --to), at most --rate a second, in the dead-letter topic's order per
// partition. Its progress is committed in the selection's group after each
// second of sending and at the end: run again, it goes on after the last
// record sent (--from-start: from the first). A dry run checks that every
// target topic exists and prints what it would send. Cancelled (SIGINT), it
// stops between two records, keeps its progress and says how to go on.
func replay(ctx context.Context, w io.Writer, f dlqFlags, opts []kgo.Opt, recs []*kgo.Record, sel Selection, group string, fromStart, dry bool,
	perSecond float64, every time.Duration) error {
	gap, err := replayGap("--rate", perSecond)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts, kgo.RecordPartitioner(placementPartitioner()))...)
	if err != nil {
		return fmt.Errorf("brokers %s: %w", f.brokers, err)
	}
	defer cl.Close()
	if group == "" {
		group = sel.group(f.topic)
	}
	r := &replayRun{f: f, w: w, sel: sel, group: group, gap: gap, every: every, cl: cl, next: map[int32]int64{}}
	if !fromStart {
		if err := r.loadProgress(ctx); err != nil {
			return err
		}
	}
	out, done, err := r.pick(recs)
	if err != nil {
		return err
	}
	if err := r.checkTargets(ctx, out); err != nil {
		return err
	}
	already := ""
	if done > 0 {
		already = fmt.Sprintf(" (%s of this selection replayed before, skipped: progress in group %s; --from-start to send them again)", cli.Count(done, "record"), group)
	}
	if dry {
		for _, o := range out {
			fmt.Fprintf(w, "would send key=%q to %s (event %s)\n", o.Key, o.Topic, eventid.FromRecord(o))
		}
		fmt.Fprintf(w, "%s would be replayed%s\n", cli.Count(len(out), "record"), already)
		return nil
	}
	return r.send(ctx, out, already)
}

// placementPartitioner places each replayed record as lanes' producer
// places its session's records: by the scheme of its lanes-placement
// header (jump or kafka; kafka when it has none, as a record of another
// producer, or one that does not parse), with hashring.Partitioner, over
// the target topic's partition count now, stamping the placement again
// (the consumer's growth logic reads it). A dead-letter copy keeps the
// original's headers, so a PartitionJump session's replayed record joins
// the session's other records; placed by murmur2 it would land elsewhere
// and the session's order would be lost.
func placementPartitioner() kgo.Partitioner {
	return byPlacement{kafka: hashring.Partitioner(hashring.SchemeKafka), jump: hashring.Partitioner(hashring.SchemeJump)}
}

type byPlacement struct{ kafka, jump kgo.Partitioner }

func (p byPlacement) ForTopic(t string) kgo.TopicPartitioner {
	return byPlacementTopic{kafka: p.kafka.ForTopic(t), jump: p.jump.ForTopic(t)}
}

// byPlacementTopic places the records of one topic; franz-go calls it
// under the topic's partitioner lock, as it does the two it picks from.
type byPlacementTopic struct{ kafka, jump kgo.TopicPartitioner }

// of is the partitioner of r's scheme. Partition stamps the header again
// with the same scheme, so the choice does not change once made.
func (pt byPlacementTopic) of(r *kgo.Record) kgo.TopicPartitioner {
	for _, h := range r.Headers {
		if h.Key == hashring.HeaderPlacement {
			if pl, err := hashring.ParsePlacement(h.Value); err == nil && pl.Scheme == hashring.SchemeJump {
				return pt.jump
			}
			break
		}
	}
	return pt.kafka
}

func (pt byPlacementTopic) RequiresConsistency(r *kgo.Record) bool {
	return pt.of(r).RequiresConsistency(r)
}

func (pt byPlacementTopic) Partition(r *kgo.Record, n int) int { return pt.of(r).Partition(r, n) }

// pick builds the records to send: those selected, after the progress.
// done counts the selected ones the progress skips.
func (r *replayRun) pick(recs []*kgo.Record) (out []*kgo.Record, done int, err error) {
	for _, rec := range recs {
		if !r.sel.picks(rec) {
			continue
		}
		if rec.Offset < r.next[rec.Partition] {
			done++
			continue
		}
		dest := r.sel.To
		if dest == "" {
			dest, _ = eventid.Header(rec, consumer.HeaderDLQTopic)
		}
		if dest == "" {
			return nil, 0, fmt.Errorf("record %d/%d of %s has no %s header: name the target topic with --to", rec.Partition, rec.Offset, r.f.topic, consumer.HeaderDLQTopic)
		}
		n := &kgo.Record{Topic: dest, Key: rec.Key, Value: rec.Value, Partition: rec.Partition, Offset: rec.Offset} // Partition, Offset: its place in the DLQ, for the progress
		for _, h := range rec.Headers {
			if !dlqHeaders[h.Key] {
				n.Headers = append(n.Headers, h)
			}
		}
		out = append(out, n)
	}
	return out, done, nil
}

// checkTargets fails when a target topic does not exist.
func (r *replayRun) checkTargets(ctx context.Context, out []*kgo.Record) error {
	var names []string
	for _, o := range out {
		if !slices.Contains(names, o.Topic) {
			names = append(names, o.Topic)
		}
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	ctx, cancel := context.WithTimeout(ctx, r.f.timeout)
	defer cancel()
	missing, err := missingTopics(ctx, kadm.NewClient(r.cl), names...)
	if err != nil {
		return awaitErr(r.f, "looking up the target topics "+strings.Join(names, ", "), err)
	}
	if len(missing) > 0 {
		hint := "create them or name another topic with --to"
		if r.sel.To != "" {
			hint = "create it or fix --to"
		}
		return fmt.Errorf("target topic %s: no such topic on brokers %s: %s", strings.Join(missing, ", "), r.f.brokers, hint)
	}
	return nil
}

// send sends out in order, saving the progress as it goes; it stops
// between two records when ctx ends. With --rate, each record is sent at
// least 1/rate after the one before, measured when each is sent: a late
// wake never lets the next ones catch up (a token bucket's reservations
// would, sending them together).
func (r *replayRun) send(ctx context.Context, out []*kgo.Record, already string) error {
	start, shown := time.Now(), time.Now()
	r.lastSave = start
	var due time.Time // when the next record may be sent
	for _, o := range out {
		if !waitUntil(ctx, due) {
			return r.stopped(len(out))
		}
		if r.gap > 0 {
			due = time.Now().Add(r.gap)
		}
		dlqPart, dlqOff := o.Partition, o.Offset
		o.Partition, o.Offset = 0, 0
		pctx, cancel := context.WithTimeout(ctx, r.f.timeout)
		err := r.cl.ProduceSync(pctx, o).FirstErr()
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return r.stopped(len(out))
			}
			serr := r.saveProgress()
			return fmt.Errorf("%w (progress saved: %v)", awaitErr(r.f, fmt.Sprintf("sending record %d/%d of %s to %s (%d of %d sent)", dlqPart, dlqOff, r.f.topic, o.Topic, r.sent, len(out)), err), serr)
		}
		r.sent++
		r.next[dlqPart] = dlqOff + 1
		if time.Since(r.lastSave) >= time.Second {
			if err := r.saveProgress(); err != nil {
				return err
			}
		}
		if r.every > 0 && time.Since(shown) >= r.every {
			shown = time.Now()
			fmt.Fprintf(r.w, "replayed %d of %d (%.1f/s)\n", r.sent, len(out), float64(r.sent)/time.Since(start).Seconds())
		}
	}
	if err := r.saveProgress(); err != nil {
		return err
	}
	fmt.Fprintf(r.w, "%s replayed%s\n", cli.Count(r.sent, "record"), already)
	return nil
}

// stopped saves the progress of a cancelled replay and says how to go on.
func (r *replayRun) stopped(total int) error {
	err := r.saveProgress()
	fmt.Fprintf(r.w, "stopped after %d of %d records: run the same command again to go on from there (progress in group %s)\n", r.sent, total, r.group)
	return err
}

// loadProgress reads the selection's progress: the group's committed
// offsets of the dead-letter topic.
func (r *replayRun) loadProgress(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.f.timeout)
	defer cancel()
	offs, err := kadm.NewClient(r.cl).FetchOffsets(ctx, r.group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil // never run: no progress
	}
	if err != nil {
		return awaitErr(r.f, "reading the replay's progress (group "+r.group+")", err)
	}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == r.f.topic && o.Err == nil && o.At >= 0 {
			r.next[o.Partition] = o.At
		}
	})
	return nil
}

// saveProgress commits the offsets after the last record sent of each
// partition, in the selection's group. It has a context of its own: it
// also runs once the command is cancelled.
func (r *replayRun) saveProgress() error {
	r.lastSave = time.Now()
	if len(r.next) == 0 {
		return nil
	}
	var offs kadm.Offsets
	for p, at := range r.next {
		offs.Add(kadm.Offset{Topic: r.f.topic, Partition: p, At: at, LeaderEpoch: -1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.f.timeout)
	defer cancel()
	resp, err := kadm.NewClient(r.cl).CommitOffsets(ctx, r.group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return awaitErr(r.f, "saving the replay's progress (group "+r.group+"): the records after the last one saved would be sent again by the next run", err)
	}
	return nil
}

// Replay replays sel from the dead-letter topic topic at most perSecond
// records a second (0: no cap), writing its progress and outcome lines to
// w, as lanes dlq replay does (the console's replay action).
func Replay(ctx context.Context, w io.Writer, brokers []string, topic string, opts []kgo.Opt, timeout time.Duration, sel Selection, perSecond float64) error {
	if _, err := replayGap("rate", perSecond); err != nil {
		return err
	}
	f := dlqFlags{brokers: strings.Join(brokers, ","), topic: topic, timeout: timeout}
	all := append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)
	recs, err := readDLQ(ctx, f, all)
	if err != nil {
		return err
	}
	return replay(ctx, w, f, all, recs, sel, "", false, false, perSecond, 5*time.Second)
}

// RateGap is the least time between two records a replay sends at most
// perSecond a second. A rate that is not above 0, not a number, infinite,
// or so low that the gap overflows a time.Duration (below about 1.1e-10 a
// second, a record every 292 years) is an error that names name, the flag
// or form field it came from.
func RateGap(name string, perSecond float64) (time.Duration, error) {
	if math.IsNaN(perSecond) || math.IsInf(perSecond, 0) || perSecond <= 0 {
		return 0, fmt.Errorf("%s %v: want a number of records a second above 0", name, perSecond)
	}
	gap := float64(time.Second) / perSecond
	if gap >= float64(math.MaxInt64) { // float64(MaxInt64) is 2^63: out of range
		return 0, fmt.Errorf("%s %v: want at least %.2g records a second (one every 292 years)",
			name, perSecond, float64(time.Second)/float64(math.MaxInt64))
	}
	return time.Duration(gap), nil
}

// replayGap is RateGap, with 0 for no cap (--rate 0).
func replayGap(name string, perSecond float64) (time.Duration, error) {
	if perSecond == 0 {
		return 0, nil
	}
	gap, err := RateGap(name, perSecond)
	if err != nil {
		return 0, fmt.Errorf("%w, or 0 for no cap", err)
	}
	return gap, nil
}

// waitUntil waits until at, or until ctx ends (false).
func waitUntil(ctx context.Context, at time.Time) bool {
	if d := time.Until(at); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return ctx.Err() == nil
}
