package lanestest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer"
)

// OutputReport is what a read_committed reader of an exactly-once
// pipeline's output topics saw (consumer.Config.Transactions): every
// output counted by the input it answers, from the headers lanes sets on
// each (consumer.HeaderInput: the input's topic, partition and offset;
// consumer.HeaderOutput: its place among the input's outputs, "k/n").
type OutputReport struct {
	// Outputs is the number of output records read.
	Outputs int
	// Inputs maps each input ("topic/partition@offset") to the outputs
	// of it read.
	Inputs map[string]int
	// Partial lists inputs some of whose outputs were read and some not:
	// a transaction that committed part of an input's outputs.
	Partial []string
	// Duplicated lists inputs one of whose outputs was read twice or
	// more: an input handled again after its outputs committed.
	Duplicated []string
	// OutOfOrder lists, as "topic/partition key", the keys whose outputs
	// on one output partition are not in their inputs' order.
	OutOfOrder []string
	// Unmarked counts records without lanes' output headers.
	Unmarked int
}

// Err is nil when every input's outputs were read whole, once each, in
// input order, and names what broke otherwise.
func (r OutputReport) Err() error {
	var errs []error
	if len(r.Partial) > 0 {
		errs = append(errs, fmt.Errorf("%d inputs with part of their outputs: %.5q", len(r.Partial), r.Partial))
	}
	if len(r.Duplicated) > 0 {
		errs = append(errs, fmt.Errorf("%d inputs with an output read twice: %.5q", len(r.Duplicated), r.Duplicated))
	}
	if len(r.OutOfOrder) > 0 {
		errs = append(errs, fmt.Errorf("%d keys with outputs out of input order: %.5q", len(r.OutOfOrder), r.OutOfOrder))
	}
	return errors.Join(errs...)
}

// ReadOutputs reads topics at read_committed from their start to their
// last stable offsets now, through a client made with opts (the brokers,
// TLS, SASL), and reports their outputs by input.
func ReadOutputs(ctx context.Context, opts []kgo.Opt, topics ...string) (OutputReport, error) {
	cl, err := kgo.NewClient(append(slices.Clone(opts), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords())...) // a transaction's marker may be the last record before the end
	if err != nil {
		return OutputReport{}, fmt.Errorf("lanestest: output reader: %w", err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return OutputReport{}, fmt.Errorf("lanestest: last stable offsets of %q: %w", topics, err)
	}
	left := map[string]map[int32]int64{} // what is still to read, by topic and partition
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			if left[o.Topic] == nil {
				left[o.Topic] = map[int32]int64{}
			}
			left[o.Topic][o.Partition] = o.Offset
		}
	})
	c := newOutputCount()
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return OutputReport{}, fmt.Errorf("lanestest: read outputs: %w (left: %v)", err, left)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := left[r.Topic][r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if !r.Attrs.IsControl() {
				c.add(r)
			}
			if r.Offset+1 >= end {
				delete(left[r.Topic], r.Partition)
				if len(left[r.Topic]) == 0 {
					delete(left, r.Topic)
				}
			}
		})
	}
	return c.report(), nil
}

// outputCount counts outputs as ReadOutputs reads them.
type outputCount struct {
	r     OutputReport
	seen  map[string][]int // input → times each of its outputs was read
	last  map[string]place // "topic/partition key" → the last output's place there
	bad   map[string]bool
	multi map[string]bool
}

// place is an output's place: its input's partition and offset, and k.
type place struct {
	in     string // the input's topic/partition
	offset int64
	k      int
}

func newOutputCount() *outputCount {
	return &outputCount{r: OutputReport{Inputs: map[string]int{}}, seen: map[string][]int{},
		last: map[string]place{}, bad: map[string]bool{}, multi: map[string]bool{}}
}

func (c *outputCount) add(r *kgo.Record) {
	var in, out string
	for _, h := range r.Headers {
		switch h.Key {
		case consumer.HeaderInput:
			in = string(h.Value)
		case consumer.HeaderOutput:
			out = string(h.Value)
		}
	}
	ks, ns, ok := strings.Cut(out, "/")
	k, err1 := strconv.Atoi(ks)
	n, err2 := strconv.Atoi(ns)
	tp, offs, ok2 := strings.Cut(in, "@")
	offset, err3 := strconv.ParseInt(offs, 10, 64)
	if !ok || !ok2 || err1 != nil || err2 != nil || err3 != nil || k < 0 || k >= n {
		c.r.Unmarked++
		return
	}
	c.r.Outputs++
	c.r.Inputs[in]++
	s := c.seen[in]
	if s == nil {
		s = make([]int, n)
		c.seen[in] = s
	}
	if len(s) == n {
		s[k]++
	}
	key := r.Topic + "/" + strconv.Itoa(int(r.Partition)) + " " + string(r.Key)
	p := place{in: tp, offset: offset, k: k}
	if l, ok := c.last[key]; ok && l.in == p.in && (p.offset < l.offset || p.offset == l.offset && p.k <= l.k) && !c.bad[key] {
		c.bad[key] = true
		c.r.OutOfOrder = append(c.r.OutOfOrder, key)
	}
	c.last[key] = p
}

func (c *outputCount) report() OutputReport {
	for in, s := range c.seen {
		whole := true
		for _, n := range s {
			if n == 0 {
				whole = false
			}
			if n > 1 && !c.multi[in] {
				c.multi[in] = true
				c.r.Duplicated = append(c.r.Duplicated, in)
			}
		}
		if !whole {
			c.r.Partial = append(c.r.Partial, in)
		}
	}
	slices.Sort(c.r.Partial)
	slices.Sort(c.r.Duplicated)
	slices.Sort(c.r.OutOfOrder)
	return c.r
}
