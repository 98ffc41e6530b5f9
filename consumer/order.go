package consumer

import (
	"fmt"
	"slices"
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

// laneOf is the lane w runs in on p under order o: its session's (with no
// session, its partition's), its partition's, or one of its own.
func laneOf(o Order, w *work, p *partition) string {
	switch {
	case o == OrderNone:
		return p.keyless + "@" + strconv.FormatInt(w.rec.Offset, 10)
	case o == OrderPartition || w.session == "":
		return p.keyless // computed once: no allocation per record
	}
	return w.session
}

// validateOrder checks cfg.Order against the consumed topics.
func validateOrder(cfg *Config) error {
	for topic, o := range cfg.Order {
		if o < OrderSession || o > OrderNone {
			return fmt.Errorf("%w: Order: topic %q: unknown order %d (OrderSession, OrderPartition or OrderNone)", ErrConfig, topic, int(o))
		}
		if !slices.Contains(cfg.Topics, topic) {
			return fmt.Errorf("%w: Order: topic %q is not consumed (Topics %q)", ErrConfig, topic, cfg.Topics)
		}
	}
	return nil
}
