package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/bench"
	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
)

// progress prints a live line while the demo runs.
type progress struct {
	w     io.Writer
	chk   *checker
	total int
	tty   bool
}

func newProgress(w io.Writer, chk *checker, total int) *progress {
	return &progress{w: w, chk: chk, total: total, tty: cli.IsTTY(w)}
}

// until prints progress until done is closed (true) or ctx ends (false).
func (p *progress) until(ctx context.Context, done <-chan struct{}) bool {
	every := time.Second
	if p.tty {
		every = 250 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	last, lastAt := 0, time.Now()
	for {
		select {
		case <-done:
			return true
		case <-ctx.Done():
			return false
		case now := <-t.C:
			p.chk.mu.Lock()
			finished := p.chk.processed + p.chk.deadLetters
			dlq := p.chk.deadLetters
			p.chk.mu.Unlock()
			rate := float64(finished-last) / now.Sub(lastAt).Seconds()
			last, lastAt = finished, now
			line := fmt.Sprintf("produced %d/%d  processed %d  retries %d  DLQ %d  %.0f msg/s",
				p.chk.sent.Load(), p.total, finished, p.chk.retries.Load(), dlq, rate)
			cli.ProgressLine(p.w, p.tty, line)
		}
	}
}

func (p *progress) clear() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

type demoReport struct {
	messages, processed, deadLetters, inDLQ  int
	violations, lost, duplicates, sendErrors int
	corrections, sessions                    int
	retries                                  int64
	elapsed                                  time.Duration
	p50, p99                                 time.Duration
	finished                                 bool
	baseline                                 float64       // msgs/s of one goroutine per partition, 0 if not measured
	details                                  []string      // the ledger's first problems
	paced                                    *bench.Result // the paced phase, nil if skipped
	pacedRate                                int           // its msgs/s
	dedup                                    *dedupReport
}

// dedupReport is what --dedup adds: the crash and the effects applied.
type dedupReport struct {
	store                string
	rewoundTo, crashedAt int
	skipped              int64 // deliveries of done events the store skipped
	effects              int   // duplicate effects
}

func (c *checker) report(elapsed time.Duration, inDLQ int, finished bool) demoReport {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.ledger.Report()
	r := demoReport{messages: c.cfg.messages, processed: c.processed, deadLetters: c.deadLetters, inDLQ: inDLQ,
		violations: v.Violations + v.Overlaps + c.misordered, lost: v.Lost, duplicates: v.Duplicates,
		sendErrors: int(c.sendErrs.Load()), corrections: c.corrections, sessions: c.cfg.sessions,
		retries: c.retries.Load(), elapsed: elapsed, finished: finished, details: v.Details}
	if n := len(c.latencies); n > 0 {
		l := slices.Clone(c.latencies)
		slices.Sort(l)
		r.p50, r.p99 = l[n*50/100], l[min(n*99/100, n-1)]
	}
	return r
}

func (r demoReport) print(w io.Writer) {
	secs := r.elapsed.Seconds()
	fmt.Fprintf(w, "report\n")
	rate := float64(r.processed+r.deadLetters) / secs
	fmt.Fprintf(w, "  throughput        %.0f msg/s (%s in %.2f s)\n", rate, cli.Count(r.processed+r.deadLetters, "message"), secs)
	if r.baseline > 0 {
		fmt.Fprintf(w, "  baseline          %.0f msg/s with one goroutine per partition, same work: lanes is %.1fx\n", r.baseline, rate/r.baseline)
	}
	fmt.Fprintf(w, "  latency, burst    p50 %v  p99 %v: all %s sent at once, so this is mostly time waiting in the backlog (send to handled)\n",
		r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond), cli.Count(r.messages, "message"))
	if p := r.paced; p != nil && p.Handled > 0 {
		fmt.Fprintf(w, "  latency, paced    p50 %s  p99 %s  p99.9 %s  max %s: %s at %d msg/s, well below capacity (intended send to handled, retries included)\n",
			bench.FormatDuration(p.P50), bench.FormatDuration(p.P99), bench.FormatDuration(p.P999), bench.FormatDuration(p.Max), cli.Count(p.Handled, "message"), r.pacedRate)
	}
	fmt.Fprintf(w, "  order violations  %d (every message of every session checked, overlapping calls included)\n", r.violations)
	fmt.Fprintf(w, "  lost              %d (acknowledged but neither handled nor dead-lettered)\n", r.lost)
	fmt.Fprintf(w, "  dead-lettered     %d (%s in the DLQ topic)\n", r.deadLetters, cli.Count(r.inDLQ, "record"))
	fmt.Fprintf(w, "  retries           %d\n", r.retries)
	if d := r.dedup; d != nil {
		fmt.Fprintf(w, "  crash             consumer stopped at %d done; offsets back to those committed at %d done; a new consumer took over\n",
			d.crashedAt, d.rewoundTo)
		fmt.Fprintf(w, "  duplicates        %s (%d skipped by the %s store), duplicate effects %d\n",
			cli.Count(r.duplicates, "delivery"), d.skipped, d.store, d.effects)
	} else {
		fmt.Fprintf(w, "  duplicates        %d\n", r.duplicates)
	}
	fmt.Fprintf(w, "  corrections       %d \"make it Paris\" applied after their \"book a flight to London\"\n", r.corrections)
	if r.sendErrors > 0 {
		fmt.Fprintf(w, "  send errors       %d\n", r.sendErrors)
	}
	for _, d := range r.details {
		fmt.Fprintf(w, "  ! %s\n", d)
	}
}

// verdict fails the run when a guarantee was broken or it did not finish.
func (r demoReport) verdict() error {
	var errs []error
	if !r.finished {
		errs = append(errs, fmt.Errorf("did not finish: %d of %s done", r.processed+r.deadLetters, cli.Count(r.messages, "message")))
	}
	if r.violations > 0 {
		errs = append(errs, errors.New(cli.Count(r.violations, "order violation")))
	}
	if r.dedup != nil && r.dedup.effects > 0 {
		errs = append(errs, fmt.Errorf("%s with --dedup %s", cli.Count(r.dedup.effects, "duplicate effect"), r.dedup.store))
	}
	if r.lost > 0 {
		errs = append(errs, fmt.Errorf("%s lost", cli.Count(r.lost, "message")))
	}
	if p := r.paced; p != nil && (!p.Finished || p.Violations+p.Overlaps > 0) {
		errs = append(errs, fmt.Errorf("paced phase: %d of %s handled, %s", p.Handled, cli.Count(p.Messages, "message"), cli.Count(p.Violations+p.Overlaps, "order violation")))
	}
	if r.inDLQ < r.deadLetters {
		errs = append(errs, fmt.Errorf("%d dead-lettered but only %d in the DLQ topic", r.deadLetters, r.inDLQ))
	}
	return errors.Join(errs...)
}
