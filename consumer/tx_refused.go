package consumer

import (
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/lanesdev/lanes/eventid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// An output the broker refuses for ever (too large for its topic) would
// abort every transaction that carries it: its input, handled again after
// the rewind, makes the same output again, and the whole member would
// commit nothing. The broker refuses a whole batch, so every output
// batched with the large one fails too: each transaction's refusals name,
// for each output partition, the input (HeaderInput) of its largest
// refused output. Once an input was named twice (a handler may make a
// different output when it runs again), its next attempt fails with a
// permanent error naming the refusal (Message.Output returns it too), and
// its record goes the way of any permanent failure: to the dead-letter
// topic, in the transaction that commits its offset. Two aborts, then the
// member goes on.

// refusals are the outputs refused for their size in the transaction
// under way (the largest by output partition), and the inputs named so
// far (inputName): how many times, and the last refusal.
type refusals struct {
	mu     sync.Mutex
	now    map[string]sizeRefusal // by output topic/partition
	inputs map[string]refusalCount
}

type sizeRefusal struct {
	r    *kgo.Record
	size int
	err  error
}

type refusalCount struct {
	n   int
	err error
}

// refusalsLimit bounds the inputs kept: one named once whose next
// attempt's outputs were written stays until then (rare: a handler whose
// outputs differ from one attempt to the next, or one batched twice with
// another's refused output).
const refusalsLimit = 10000

// note keeps output r, refused with err, when err refuses its size and r
// is the largest refused on its partition so far.
func (rs *refusals) noteRefused(r *kgo.Record, err error) {
	if !errors.Is(err, kerr.MessageTooLarge) && !errors.Is(err, kerr.RecordListTooLarge) {
		return
	}
	size := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		size += len(h.Key) + len(h.Value)
	}
	tp := r.Topic + "/" + strconv.FormatInt(int64(r.Partition), 10)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.now == nil {
		rs.now = map[string]sizeRefusal{}
	}
	if size > rs.now[tp].size {
		rs.now[tp] = sizeRefusal{r, size, err}
	}
}

// settle names the input of each partition's largest refused output,
// once every output of the ending transaction was answered.
func (rs *refusals) settleRefused() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for tp, f := range rs.now {
		delete(rs.now, tp)
		in, ok := eventid.Header(f.r, HeaderInput)
		if !ok {
			continue
		}
		if rs.inputs == nil || len(rs.inputs) >= refusalsLimit {
			rs.inputs = map[string]refusalCount{}
		}
		rs.inputs[in] = refusalCount{rs.inputs[in].n + 1, f.err}
	}
}

// take is the refusal of the input rec when it was named twice (then no
// longer kept), or nil.
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
	delete(rs.inputs, in)
	return r.err
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
