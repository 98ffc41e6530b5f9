package lanestest

import (
	"context"
	"errors"
	"fmt"

	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/eventid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Runner is what Run runs: a *consumer.Consumer, or a service that owns
// one and runs it until its context ends.
type Runner interface {
	Run(ctx context.Context) error
}

// RunOptions are Run's settings besides the runner and the ledger; the
// zero value waits for every message acknowledged so far and watches no
// dead-letter topic.
type RunOptions struct {
	// Want is how many messages must be accounted for; 0 means every
	// message the ledger recorded as acknowledged when Run starts
	// (l.AckedCount()).
	Want int
	// DeadLetterTopic is the consumer's Config.DeadLetterTopic: records
	// reaching it are recorded as they arrive, so that messages that
	// exhausted their retries count too, and once the consumer stopped it
	// is read to its end. Empty: none is watched (a consumer that
	// retries forever, or a test that reads it itself).
	DeadLetterTopic string
	// Broker is the cluster DeadLetterTopic is read from; required with it.
	Broker *Broker
}

// Run runs c until o.Want messages recorded in l are accounted for
// (finished by the handler or, with a dead-letter topic to watch, found
// there), then cancels it and returns Run's error: nil after a clean
// drain, commit and leave. It returns early with an error when ctx ends
// first (give ctx a deadline) or when c.Run fails.
//
//	err := lanestest.Run(ctx, c, l, lanestest.RunOptions{Broker: b, DeadLetterTopic: "chat-dlq"})
func Run(ctx context.Context, c Runner, l *Ledger, o RunOptions) error {
	want, dlq, b := o.Want, o.DeadLetterTopic, o.Broker
	switch {
	case want < 0:
		return fmt.Errorf("lanestest: RunOptions.Want %d: want 0 (every acknowledged message) or more", want)
	case dlq != "" && b == nil:
		return fmt.Errorf("lanestest: RunOptions.DeadLetterTopic %q needs RunOptions.Broker, the cluster to read it from", dlq)
	case want == 0:
		want = l.AckedCount()
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(runCtx) }()
	watched := make(chan error, 1)
	if dlq != "" {
		go func() { watched <- WatchDeadLetters(runCtx, b, dlq, l) }()
	} else {
		watched <- nil
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- l.WaitAccounted(runCtx, want) }()

	var err error
	select {
	case err = <-waitErr:
		cancel()
		if runErr := <-errc; runErr != nil {
			err = errors.Join(err, fmt.Errorf("consumer: %w", runErr))
		}
	case runErr := <-errc:
		cancel()
		err = errors.Join(<-waitErr, fmt.Errorf("consumer stopped early: %v", runErr))
	}
	if werr := <-watched; werr != nil && !errors.Is(werr, context.Canceled) {
		err = errors.Join(err, werr)
	}
	if dlq != "" && err == nil {
		// The consumer wrote its last dead letters while draining.
		_, err = ReadDeadLetters(ctx, b, dlq, l)
	}
	return err
}

// WatchDeadLetters records every record of the dead-letter topic dlq in l
// (by its event ID and lanes-dlq-reason header) from the topic's start
// until ctx ends, and returns ctx's error.
func WatchDeadLetters(ctx context.Context, b *Broker, dlq string, l *Ledger) error {
	cl, err := b.Client(kgo.ConsumeTopics(dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { recordDeadLetter(l, r) })
	}
	return ctx.Err()
}

// ReadDeadLetters reads the dead-letter topic dlq from its start to its
// current end, records every record in l and returns them.
func ReadDeadLetters(ctx context.Context, b *Broker, dlq string, l *Ledger) ([]*kgo.Record, error) {
	cl, err := b.Client(kgo.ConsumeTopics(dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, dlq)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("lanestest: end offsets of %s: %w", dlq, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	var out []*kgo.Record
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("lanestest: read %d records of %s: %w", len(out), dlq, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := want[r.Partition]; ok && r.Offset < end {
				out = append(out, r)
				recordDeadLetter(l, r)
				if r.Offset >= end-1 {
					delete(want, r.Partition)
				}
			}
		})
	}
	return out, nil
}

func recordDeadLetter(l *Ledger, r *kgo.Record) {
	reason, _ := eventid.Header(r, consumer.HeaderDLQReason)
	l.DeadLettered(eventid.FromRecord(r), reason)
}
