package consumer

import (
	"errors"
)

// Errors callers branch on.
var (
	// ErrConfig is wrapped by every error [New] returns for a bad Config;
	// the message names the field.
	ErrConfig = errors.New("consumer: bad config")
	// ErrNotTransactional is returned by Message.Output on a consumer
	// without Config.Transactions: an output could not commit with its
	// input.
	ErrNotTransactional = errors.New("consumer: Message.Output needs Config.Transactions")
	// ErrFenced is wrapped by Run's error when the shutdown came while a
	// transactional member waited to join its group again: its producer
	// was fenced (another process took its transactional ID) or no
	// transaction could begin three times in a row, so it had left its
	// group (owning nothing) to join again with a new producer, which it
	// does on its own within Run (Stats.Transactions.Rejoins counts it).
	ErrFenced = errors.New("consumer: the transactional producer is fenced or cannot begin a transaction")
	// ErrRunTwice: Run was called on a consumer that already ran.
	ErrRunTwice = errors.New("consumer: Run called more than once")
	// ErrUnfinished is wrapped by Run's error when the shutdown left work
	// undone: handlers still running after ShutdownTimeout, or records
	// whose dead-letter copy could not be written. The message names each
	// partition and why; the next owner runs that work again.
	ErrUnfinished = errors.New("consumer: shutdown left work unfinished")
	// ErrCommit is wrapped by a failed commit, and so by Run's error when
	// its final commit failed (for example because a rebalance moved the
	// partitions meanwhile): the next owner starts from the last commit
	// that succeeded and runs the rest again.
	ErrCommit = errors.New("consumer: commit failed")
	// ErrHandlerPanic is wrapped by the error a recovered handler panic
	// becomes.
	ErrHandlerPanic = errors.New("consumer: handler panicked")
	// ErrUnreachable is wrapped by Ping's error when no broker answers, and
	// by Run's when it was cancelled without ever reaching a broker; the
	// message names the brokers and the last dial error.
	ErrUnreachable = errors.New("consumer: cannot reach brokers")
	// ErrTopicMissing is wrapped by Ping's error when a consumed topic or
	// the dead-letter topic does not exist, by the error of a topic
	// CreateTopics or CheckTopics found missing, and by InspectParked's
	// and ReleaseHeld's when the park topic does not exist; the message
	// names them.
	ErrTopicMissing = errors.New("consumer: topic missing")
	// ErrTopicUnfit is wrapped by the error of a topic that exists but
	// does not fit its use (TopicWrong): a park topic whose partition
	// count is not its source's, a compacted park or dead-letter topic.
	ErrTopicUnfit = errors.New("consumer: topic unfit")
	// ErrNotHeld is returned by ReleaseHeld when the session is held on no
	// partition of the topic for the group.
	ErrNotHeld = errors.New("consumer: session not held")
	// ErrNotPaused is returned by ResumeSession when the session is not
	// paused.
	ErrNotPaused = errors.New("consumer: session not paused")
)

// Errors a handler returns to say what becomes of its record: [Permanent]
// and [Undecodable] dead-letter it at once, [Park] parks its session (with
// Config.Park); any other error is retried under Config.Retry.

// permanentError marks an error that must not be retried; reason is the
// lanes-dlq-reason its record is dead-lettered with.
type permanentError struct {
	err    error
	reason Reason
}

func (e *permanentError) Error() string { return string(e.reason) + ": " + e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Is reports an Undecodable mark as errUndecodable, for IsUndecodable:
// errors.Is finds it below another mark (Permanent(Undecodable(err))),
// where errors.As stops at the outer one.
func (e *permanentError) Is(target error) bool {
	return target == errUndecodable && e.reason == ReasonDecode
}

// errUndecodable is the target IsUndecodable looks for.
var errUndecodable = errors.New("consumer: undecodable")

// Permanent wraps err so that the consumer never retries it: the message
// goes straight to the dead-letter topic with reason [ReasonPermanent].
// [IsPermanent] reports it. Permanent(nil) returns nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err, reason: ReasonPermanent}
}

// Undecodable is [Permanent] for a payload that cannot be decoded (bad
// framing, an unknown schema, bytes that do not match the schema): the
// message goes straight to the dead-letter topic with reason
// [ReasonDecode], and err's text in the lanes-dlq-error header. Codecs
// return it through their typed handlers. [IsUndecodable] reports it, and
// so does [IsPermanent]. Undecodable(nil) returns nil.
func Undecodable(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err, reason: ReasonDecode}
}

// IsPermanent reports whether err, or any error it wraps, was marked with
// [Permanent] or [Undecodable]: its record is not retried.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// IsUndecodable reports whether err, or any error it wraps, was marked
// with [Undecodable]: a payload that does not decode. Such an error is
// permanent too ([IsPermanent] reports it); IsUndecodable tells it apart
// from one marked only with [Permanent].
func IsUndecodable(err error) bool {
	return errors.Is(err, errUndecodable)
}
