package consumer

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

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
// goes on. Outputs refused while none is over its limit (batches larger
// than the topic takes: ProducerBatchMaxBytes above its max.message.bytes)
// name nothing: txEnd says what to set.

// refusals are the outputs refused for their size in the transaction
// under way, and the inputs named so far (inputName): how many times, the
// last refusal, and whether an attempt took it since the last commit.
type refusals struct {
	mu     sync.Mutex
	now    []sizeRefusal
	inputs map[string]refusalCount
	limits map[string]int // output topic → its limit, once asked (settleRefused's alone)
}

type sizeRefusal struct {
	r   *kgo.Record
	err error
}

type refusalCount struct {
	n     int
	err   error
	taken bool
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
// known yet. It returns how many were refused, and the topics of those
// that named nothing. The poll loop's alone.
func (rs *refusals) settleRefused(lookup func(topic string) int) (refused int, unnamed []string) {
	rs.mu.Lock()
	now := rs.now
	rs.now = nil
	rs.mu.Unlock()
	for _, f := range now { // lookup asks the broker: not under rs.mu
		lim, ok := rs.limits[f.r.Topic]
		if !ok {
			lim = lookup(f.r.Topic)
			if rs.limits == nil {
				rs.limits = map[string]int{}
			}
			rs.limits[f.r.Topic] = lim
		}
		in, ok := eventid.Header(f.r, HeaderInput)
		if !ok || parkwire.EncodedSize(f.r) <= lim {
			if !slices.Contains(unnamed, f.r.Topic) {
				unnamed = append(unnamed, f.r.Topic)
			}
			continue
		}
		rs.name(in, f.err)
	}
	return len(now), unnamed
}

// name counts one more refusal of input in's outputs.
func (rs *refusals) name(in string, err error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.inputs == nil {
		rs.inputs = map[string]refusalCount{}
	}
	if len(rs.inputs) >= refusalsLimit {
		for k, r := range rs.inputs {
			if r.n < 2 {
				delete(rs.inputs, k)
			}
		}
		if len(rs.inputs) >= refusalsLimit {
			clear(rs.inputs)
		}
	}
	r := rs.inputs[in]
	rs.inputs[in] = refusalCount{n: r.n + 1, err: err, taken: r.taken}
}

// takeRefused is the refusal of the input rec when it was named twice
// (kept, marked taken, until a transaction commits), or nil.
func (rs *refusals) takeRefused(rec *kgo.Record) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.inputs) == 0 {
		return nil
	}
	in := inputName(rec)
	r := rs.inputs[in]
	if r.n < 2 {
		return nil
	}
	r.taken = true
	rs.inputs[in] = r
	return r.err
}

// endedRefused is told how a transaction ended. Committed, it forgets
// the inputs taken since the last abort: their dead-letter copies are in
// it. Aborted, those are to be taken again (their inputs are handled
// again).
func (rs *refusals) endedRefused(committed bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for k, r := range rs.inputs {
		switch {
		case !r.taken:
		case committed:
			delete(rs.inputs, k)
		default:
			r.taken = false
			rs.inputs[k] = r
		}
	}
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

// judge is the outcome of an attempt that returned err: a permanent
// failure instead of a success when the input's outputs were refused
// for ever.
func (o *outputs) judgeRefused(err error) error {
	if err == nil && o.refused != nil {
		return o.refused
	}
	return err
}
