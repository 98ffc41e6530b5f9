package consumer

import (
	"context"
	"sync"
	"time"
)

// owners is the set of partitions this member owns, and the rules of
// ownership:
//
//   - a partition is owned from its assignment until it is released: after
//     the final commit of a revoke or a shutdown, or at once when lost;
//   - only owned partitions are committed, and a release waits for a
//     commit under way (both hold commitMu), so no commit ever covers a
//     partition after it was released;
//   - once shutdown began, newly assigned partitions start fenced.
//
// A shutdown fences its partitions but keeps them owned while it drains, so
// a revoke that arrives meanwhile finds them, waits for the same drain and
// commits before the rebalance goes on.
type owners struct {
	commitMu sync.Mutex // held across a commit and across a release
	// work is the parent of every partition's attempts context: the
	// consumer's work context. Set before the first assignment.
	work context.Context

	mu       sync.Mutex // guards the fields below
	parts    map[partKey]*partition
	epoch    uint64
	stopping bool
}

func newOwners() *owners {
	return &owners{work: context.Background(), parts: map[partKey]*partition{}}
}

// assign creates the state of newly assigned partitions, each with a new
// epoch.
func (o *owners) assign(tps map[string][]int32, max int, notify func(*partition)) []*partition {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*partition
	for t, ps := range tps {
		for _, id := range ps {
			o.epoch++
			k := partKey{t, id}
			p := newPartition(o.work, k, o.epoch, max, notify)
			if o.stopping {
				p.stopStarting()
			}
			o.parts[k] = p
			out = append(out, p)
		}
	}
	return out
}

// get returns the owned state of a partition, or nil.
func (o *owners) get(k partKey) *partition {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.parts[k]
}

// lookup returns the owned partitions among tps.
func (o *owners) lookup(tps map[string][]int32) []*partition {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*partition
	for t, ps := range tps {
		for _, id := range ps {
			if p := o.parts[partKey{t, id}]; p != nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// all returns every owned partition.
func (o *owners) all() []*partition {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]*partition, 0, len(o.parts))
	for _, p := range o.parts {
		out = append(out, p)
	}
	return out
}

// stop marks the start of a shutdown and fences every owned partition
// (they stay owned); it returns them.
func (o *owners) stop() []*partition {
	o.mu.Lock()
	o.stopping = true
	o.mu.Unlock()
	parts := o.all()
	for _, p := range parts {
		p.stopStarting()
	}
	return parts
}

// release ends the ownership of parts, after any commit under way.
func (o *owners) release(parts []*partition) {
	o.commitMu.Lock()
	defer o.commitMu.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range parts {
		p.release()
		if o.parts[p.key] == p {
			delete(o.parts, p.key)
		}
	}
}

// waitDrained waits until every partition's running work is over, the
// timeout passes or ctx ends, and returns the partitions still busy. The
// partitions must be fenced.
func waitDrained(ctx context.Context, parts []*partition, timeout time.Duration) []*partition {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for i, p := range parts {
		select {
		case <-p.drained:
		case <-t.C:
			return stillRunning(parts[i:])
		case <-ctx.Done():
			return stillRunning(parts[i:])
		}
	}
	return nil
}

// stillRunning returns those of parts not drained yet.
func stillRunning(parts []*partition) []*partition {
	var left []*partition
	for _, p := range parts {
		select {
		case <-p.drained:
		default:
			left = append(left, p)
		}
	}
	return left
}
