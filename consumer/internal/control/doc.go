// Package control is per-session control as rules and state: which
// sessions an operator paused or limited, the rate limits of sessions and
// of resources, and who waits for what
// (https://github.com/lanesdev/lanes/blob/main/docs/control.md).
//
// Settings come from the control topic, a compacted log an operator writes
// to (lanes session pause|resume|limit) and every member of the group
// reads: Encode and Decode are its wire format, Gate.Apply takes an entry
// in log order. Before a record's lane hands it to a worker, the consumer
// asks Gate.Admit: a paused session's lane is told to wait and its wake is
// kept until the session is resumed; a rate-limited one is told until when
// (Alarms wakes it then). A lane that waits holds no worker.
//
// Time is passed in, nothing here knows lanes, records or clients, and a
// Gate is safe for concurrent use: its state is under its own mutex, and
// the wakes it hands back are called by the caller after it returns.
package control
