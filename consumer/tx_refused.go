package consumer

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/lanesdev/lanes/consumer/internal/parkwire"
	"github.com/lanesdev/lanes/eventid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// An output refused for its size (larger than its topic's
// max.message.bytes, or than the producer's ProducerBatchMaxBytes) would
// abort every transaction that carries it: its input, handled again after
// the rewind, makes the same output again, and the whole member would
// commit nothing. The broker refuses a whole batch, so outputs batched
// with a large one are refused too: each aborted transaction names the
// input (HeaderInput) of every output refused for its size that is, alone,
// larger than its topic's limit (read from the broker the first time one
// is refused, then kept). Once an input was named twice (a handler may
// make a different output when it runs again), its attempts fail with a
// permanent error naming the refusal (Message.Output returns it too), and
// its record goes the way of any permanent failure: to the dead-letter
// topic, in the transaction that commits its offset; it is forgotten once
// a transaction commits after it was taken. Two aborts, then the member
// goes on. A dead-letter copy refused for its size (its topic's limit
// lowered, or not read, at Run) is not sent again: once named, its input
// holds its partition as a copy that cannot be written does. Outputs refused while none is over its limit (batches larger
// than the topic takes: ProducerBatchMaxBytes above its max.message.bytes)
// name nothing: txEnd says what to set.

// refusals are the outputs refused for their size in the transaction
// under way, and the inputs named so far (inputName): how many times, the
// last refusal, and whether an attempt took it since the last commit.
type refusals struct {
	mu     sync.Mutex
	now    []sizeRefusal
	inputs map[string]refusalCount
	named  atomic.Int64   // len(inputs): every record's attempt asks (takeRefused), without mu while none
	limits map[string]int // output topic → its limit, once asked (settleRefused's alone)
	dlq    string         // the dead-letter topic: a refused output to it with a copy's headers is a dead-letter copy
}

type sizeRefusal struct {
	r   *kgo.Record
	err error
}

type refusalCount struct {
	n    int
	err  error
	dead bool  // its dead-letter copy went into the open transaction
	big  error // its dead-letter copy was refused for its size: it holds its partition (fitsDead)
}

// refusalsLimit bounds the inputs kept (those named once go first), and
// refusedKept the refused outputs kept per transaction.
const (
	refusalsLimit = 10000
	refusedKept   = 4096
)

// noteRefused keeps output r, refused with err, when err refuses its size.
func (rs *refusals) noteRefused(r *kgo.Record, err error) {
	if !errors.Is(err, kerr.MessageTooLarge) && !errors.Is(err, kerr.RecordListTooLarge) {
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.now) < refusedKept {
		rs.now = append(rs.now, sizeRefusal{r, err})
	}
}

// settleRefused names the input of each output refused for its size in
// the ending transaction that is larger than its topic's limit on its
// own, once every output was answered; lookup(topic) asks for a limit not
// known yet (ok false: it could not be read, and is asked again at the
// next refusal). Where a topic's limit is not known, the largest output
// refused on each of its partitions is named: the one most likely to be
// too large alone. It returns how many were refused, and the topics of
// those that named nothing. The poll loop's alone.
func (rs *refusals) settleRefused(lookup func(topic string) (int, bool)) (refused int, unnamed []string) {
	rs.mu.Lock()
	now := rs.now
	rs.now = nil
	rs.mu.Unlock()
	largest := map[string]sizeRefusal{} // by topic/partition, where the limit is not known
	for _, f := range now {             // lookup asks the broker: not under rs.mu
		lim, known := rs.limits[f.r.Topic]
		if !known {
			if lim, known = lookup(f.r.Topic); known {
				if rs.limits == nil {
					rs.limits = map[string]int{}
				}
				rs.limits[f.r.Topic] = lim
			}
		}
		size := parkwire.EncodedSize(f.r)
		switch {
		case !known:
			tp := f.r.Topic + "/" + strconv.FormatInt(int64(f.r.Partition), 10)
			if was, ok := largest[tp]; !ok || size > parkwire.EncodedSize(was.r) {
				largest[tp] = f
			}
		case size > lim:
			rs.name(f.r, f.err)
		case !slices.Contains(unnamed, f.r.Topic):
			unnamed = append(unnamed, f.r.Topic)
		}
	}
	for _, f := range largest {
		rs.name(f.r, f.err)
	}
	return len(now), unnamed
}

// name counts one more refusal of the outputs of r's input.
func (rs *refusals) name(r *kgo.Record, err error) {
	in, ok := eventid.Header(r, HeaderInput)
	if !ok {
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.inputs == nil {
		rs.inputs = map[string]refusalCount{}
	}
	if len(rs.inputs) >= refusalsLimit {
		for k, c := range rs.inputs {
			if c.n < 2 {
				delete(rs.inputs, k)
			}
		}
		if len(rs.inputs) >= refusalsLimit {
			clear(rs.inputs)
		}
	}
	was := rs.inputs[in]
	if _, copied := eventid.Header(r, HeaderDLQReason); copied && r.Topic == rs.dlq { // its dead-letter copy: made the same again, never to be sent again
		was.big = err
		rs.inputs[in] = was
	} else {
		rs.inputs[in] = refusalCount{n: was.n + 1, err: err, dead: was.dead, big: was.big}
	}
	rs.named.Store(int64(len(rs.inputs)))
}

// deadTooLarge is the refusal of the dead-letter copy of the input rec
// for its size, or nil.
func (rs *refusals) deadTooLarge(rec *kgo.Record) error {
	if rs.named.Load() == 0 {
		return nil
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.inputs[inputName(rec)].big
}

// takeRefused is the refusal of the input rec when it was named twice
// (kept until the transaction holding its dead-letter copy commits), or
// nil.
func (rs *refusals) takeRefused(rec *kgo.Record) error {
	if rs.named.Load() == 0 {
		return nil // the usual case: no lock per record
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r := rs.inputs[inputName(rec)]; r.n >= 2 {
		return r.err
	}
	return nil
}

// deadRefused notes that the dead-letter copy of the input rec, named
// twice, went into the open transaction.
func (rs *refusals) deadRefused(rec *kgo.Record) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	in := inputName(rec)
	if r, ok := rs.inputs[in]; ok {
		r.dead = true
		rs.inputs[in] = r
	}
}

// endedRefused is told how a transaction ended. Committed, it forgets
// the inputs whose dead-letter copies it held. Aborted, those are handled
// again, and dead-lettered again.
func (rs *refusals) endedRefused(committed bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for k, r := range rs.inputs {
		switch {
		case !r.dead:
		case committed:
			delete(rs.inputs, k)
		default:
			r.dead = false
			rs.inputs[k] = r
		}
	}
	rs.named.Store(int64(len(rs.inputs)))
}

// inputName is rec's name on its outputs (HeaderInput):
// topic/partition@offset.
func inputName(rec *kgo.Record) string {
	return rec.Topic + "/" + strconv.FormatInt(int64(rec.Partition), 10) + "@" + strconv.FormatInt(rec.Offset, 10)
}

// outputsFor is the outputs of an attempt at rec: empty, and refused when
// rec's outputs were refused for their size twice.
func (rs *refusals) outputsFor(rec *kgo.Record) *outputs {
	o := new(outputs)
	if err := rs.takeRefused(rec); err != nil {
		o.refused = Permanent(fmt.Errorf("an output of this input was refused by the broker twice, and would be again: %w", err))
	}
	return o
}

// judgeRefused is the outcome of an attempt that returned err: a permanent
// failure instead of a success when the input's outputs were refused
// for ever.
func (o *outputs) judgeRefused(err error) error {
	if err == nil && o.refused != nil {
		return o.refused
	}
	return err
}
