package consumer

import (
	"context"
	"fmt"
	"slices"
	"sort"
)

// TopicHandlers is a Handler that gives each consumed topic its own
// handler, chosen by the record's topic. Under the default order
// (OrderSession), a session's records from several topics still share one
// lane: they are handled one at a time, in order of arrival, whichever
// handler each goes to; a topic ordered otherwise (Config.Order) runs its
// records in lanes of its own. New checks that every topic of
// Config.Topics has a handler and that no handler is for a topic not
// consumed; with Config.Topics left empty, the map's topics are consumed.
// Middleware wraps the whole map.
type TopicHandlers map[string]Handler

// Handle calls the handler of m's topic. A topic without one (only when
// TopicHandlers is called outside New's check) is a permanent error.
func (t TopicHandlers) Handle(ctx context.Context, m *Message) error {
	h := t[m.Record.Topic]
	if h == nil {
		return Permanent(fmt.Errorf("consumer: no handler for topic %s in TopicHandlers", m.Record.Topic))
	}
	return h.Handle(ctx, m)
}

// topics are the topics t has handlers for, sorted: Config.Topics when
// it is left empty.
func (t TopicHandlers) topics() []string {
	out := make([]string, 0, len(t))
	for topic := range t {
		out = append(out, topic)
	}
	sort.Strings(out)
	return out
}

// check says what is wrong with t for topics: a consumed topic without a
// handler, a nil handler, or a handler for a topic not consumed.
func (t TopicHandlers) check(topics []string) error {
	for _, topic := range topics {
		if f, ok := t[topic].(HandlerFunc); t[topic] == nil || (ok && f == nil) {
			return fmt.Errorf("%w: handler: TopicHandlers has no handler for consumed topic %q", ErrConfig, topic)
		}
	}
	extra := make([]string, 0, len(t))
	for topic := range t {
		if !slices.Contains(topics, topic) {
			extra = append(extra, topic)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return fmt.Errorf("%w: handler: TopicHandlers has handlers for %q, not in Topics %q", ErrConfig, extra, topics)
	}
	return nil
}
