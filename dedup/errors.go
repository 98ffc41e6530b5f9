package dedup

import "errors"

// Errors callers branch on.
var (
	// ErrConfig is wrapped by every error New and NewMemory return for a
	// bad Config; the message names the field.
	ErrConfig = errors.New("dedup: bad config")
	// ErrStore is wrapped by an attempt's error when the store could not
	// be asked whether the event may run: the handler did not run, and the
	// consumer retries the attempt.
	ErrStore = errors.New("dedup: store failed")
	// ErrBusy is wrapped by an attempt's error when another claim on the
	// event had not expired before the attempt's context ended.
	ErrBusy = errors.New("dedup: event claimed by another attempt")
)
