package bench

import (
	"context"
	"runtime"
	"sync"
)

// The two baselines that say what the machine can do, so lanes is measured
// against a limit rather than a nominal bound:
//
//   - minimal: the dispatch itself. Poll, then a per-key FIFO (made on the
//     key's first record, dropped when empty) drained by GOMAXPROCS workers
//     from a run queue, one wake per poll; no offset tracking, no commits,
//     no attempt contexts.
//   - ceiling: the same handler, sessions and per-session order with no
//     Kafka at all: one goroutine per session runs its messages, in order,
//     from memory. Closed mode only.

// runMinimal is the minimal per-key dispatcher.
func runMinimal(ctx context.Context, e runEnv) error {
	cl, err := groupClient(e)
	if err != nil {
		return err
	}
	defer cl.Close()
	d := newKeyRunQueue(ctx, e.t)
	defer d.stop()
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 512)
		d.mu.Lock()
		fs.EachRecord(d.addLocked)
		d.mu.Unlock()
		d.cond.Broadcast()
	}
	return nil
}

// keyRunQueue is runMinimal's per-key FIFOs and their workers. A key's
// FIFO is either in the run queue or held by one worker, never both, so a
// key's records run one at a time, in order.
type keyRunQueue struct {
	ctx    context.Context
	t      *tally
	mu     sync.Mutex
	cond   sync.Cond
	fifos  map[string]*keyFIFO
	runq   []*keyFIFO
	closed bool
	wg     sync.WaitGroup
}

type keyFIFO struct {
	key  string
	vals [][]byte
}

func newKeyRunQueue(ctx context.Context, t *tally) *keyRunQueue {
	d := &keyRunQueue{ctx: ctx, t: t, fifos: map[string]*keyFIFO{}}
	d.cond.L = &d.mu
	for range runtime.GOMAXPROCS(0) {
		d.wg.Go(d.work)
	}
	return d
}

func (d *keyRunQueue) addLocked(r *kgoRecord) {
	f := d.fifos[string(r.Key)]
	if f == nil {
		f = &keyFIFO{key: string(r.Key)}
		d.fifos[f.key] = f
		d.runq = append(d.runq, f)
	}
	f.vals = append(f.vals, r.Value)
}

func (d *keyRunQueue) work() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		for len(d.runq) == 0 && !d.closed {
			d.cond.Wait()
		}
		if d.closed {
			return
		}
		f := d.runq[0]
		d.runq = d.runq[1:]
		vals := f.vals
		f.vals = nil
		d.mu.Unlock()
		for _, v := range vals {
			d.t.handleRetrying(d.ctx, v)
		}
		d.mu.Lock()
		if len(f.vals) == 0 {
			delete(d.fifos, f.key)
		} else {
			d.runq = append(d.runq, f)
		}
	}
}

// stop ends the workers; records still queued are dropped (the run is
// over).
func (d *keyRunQueue) stop() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.cond.Broadcast()
	d.wg.Wait()
}

// runCeiling runs the workload's plan from memory: a goroutine per
// session, each handling its messages in order. It does not read the
// topic; the tally ends the run when every message was handled.
func runCeiling(ctx context.Context, e runEnv) error {
	w := e.t.w
	p := w.plan()
	vals := make([][][]byte, w.Sessions)
	for i := range w.Messages {
		s := p.session[i]
		vals[s] = append(vals[s], encodeValue(make([]byte, 0, valueLen), s, p.seq[i], uint32(i), 0))
	}
	var wg sync.WaitGroup
	for _, vs := range vals {
		if len(vs) == 0 {
			continue
		}
		wg.Go(func() {
			for _, v := range vs {
				e.t.handleRetrying(ctx, v)
			}
		})
	}
	wg.Wait()
	<-ctx.Done()
	return nil
}
