package consumer

import "errors"

// Errors callers branch on.
var (
	// ErrConfig is wrapped by every error [New] returns for a bad Config;
	// the message names the field.
	ErrConfig = errors.New("consumer: bad config")
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
	// the dead-letter topic does not exist, and by the error of a topic
	// CreateTopics or CheckTopics found missing; the message names them.
	ErrTopicMissing = errors.New("consumer: topic missing")
)
