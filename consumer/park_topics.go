package consumer

import (
	"fmt"
	"time"
)

// parkTopics are the park topics of cfg's consumed topics; none without
// parking. cfg.Park has its defaults.
func parkTopics(cfg *Config) []string {
	if !cfg.Park.Enabled {
		return nil
	}
	out := make([]string, len(cfg.Topics))
	for i, t := range cfg.Topics {
		out[i] = t + cfg.Park.TopicSuffix
	}
	return out
}

// updatePark takes the park topics a check found missing: it warns when
// one goes missing and says so at info when it exists again.
func (w *topicWatch) updatePark(missing []string, now time.Time) {
	w.mu.Lock()
	was := w.parkMissing
	if len(missing) > 0 && len(was) == 0 {
		w.parkSince = now
	}
	w.parkMissing = missing
	w.mu.Unlock()
	if gone := without(missing, was); len(gone) > 0 {
		w.log.Warn().Strs("topics", gone).
			Msg("park topics missing: a partition they serve is held at its assignment (nothing of it is handled), and one already owned holds a record it must park until its park topic exists; create them with their source topic's partition count and cleanup.policy=delete, or fix Config.Park.TopicSuffix")
	}
	if found := without(was, missing); len(found) > 0 {
		w.log.Info().Strs("topics", found).Msg("topics found: they exist now")
	}
}

// parkMissingReason is the readiness reason about park topics missing
// since since.
func parkMissingReason(missing []string, since time.Time) string {
	return fmt.Sprintf("park topics missing since %s: %v: a partition they serve is held at its assignment, and one already owned holds a record it must park; create them with their source topic's partition count and cleanup.policy=delete, or fix Config.Park.TopicSuffix",
		since.UTC().Format(time.RFC3339), missing)
}
