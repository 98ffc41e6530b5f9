package consumer

import (
	"strconv"
)

// Order is how the records of a consumed topic are ordered
// (Config.Order).
type Order int

const (
	// OrderSession, the default, handles a session's records one at a
	// time, in order; sessions run in parallel.
	OrderSession Order = iota
	// OrderPartition handles a partition's records one at a time, in
	// offset order, whatever their session: Kafka's own order, for a topic
	// whose records depend on each other across sessions.
	OrderPartition
	// OrderNone handles every record of the topic as soon as a handler is
	// free, in parallel whatever its session (read receipts, metrics):
	// records of one session may run at once and out of order. Commits
	// stay contiguous: a committed offset never passes an unfinished
	// record, and delivery is at least once.
	OrderNone
)

func (o Order) String() string {
	switch o {
	case OrderSession:
		return "session"
	case OrderPartition:
		return "partition"
	case OrderNone:
		return "none"
	}
	return "Order(" + strconv.Itoa(int(o)) + ")"
}
