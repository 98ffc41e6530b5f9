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
	// ErrNoEventID is wrapped, inside consumer.Permanent, by an attempt's
	// error when its message has no key (no lanes-event-id header, or
	// Config.Key returned "") and Config.NoEventID is RefuseNoEventID: the
	// message goes to the dead-letter topic; the handler did not run.
	ErrNoEventID = errors.New("dedup: message has no event ID")
)
