package consumer

import (
	"fmt"
	"time"
)

// GrowthPolicy configures how a session's order is kept when a consumed
// topic's partition count grows
// (https://github.com/lanesdev/lanes/blob/main/docs/operations.md#adding-partitions-to-a-live-topic).
// The zero value keeps it, with the defaults.
//
// lanes' producer stamps each record with the partition count it hashed
// the session over. A record whose stamp places its session on another
// partition than an older count did waits, with the rest of its session
// on its new partition, until the group has handled the session's records
// on the old one; other sessions of the partition flow meanwhile. Records
// of producers that do not stamp (other clients) are handled as before:
// a session they move may overtake itself.
type GrowthPolicy struct {
	// Off turns the ordering across a growth off: moved sessions are
	// handled at once, on their new partition, as other Kafka clients do.
	// A partition added to a consumed topic is still read from its start.
	Off bool
	// Grace is how long after a growth producers may still place records
	// with the old count (the lanes producer learns the new count within
	// its client's MetadataMaxAge, 5 minutes by default). The change ends
	// once Grace has passed and the group has handled the old partitions'
	// records up to their ends then; until it ends, moved sessions are
	// checked. Default: [DefaultGrowthGrace].
	Grace time.Duration
	// HealthAge makes Health report a moved session that has waited for
	// its old partition this long (its old partition is not consumed, or
	// is held). Default: [DefaultGrowthHealthAge].
	HealthAge time.Duration
}

// Defaults of GrowthPolicy.
const (
	DefaultGrowthGrace     = 6 * time.Minute
	DefaultGrowthHealthAge = 2 * time.Minute
)

func (g GrowthPolicy) withDefaults() (GrowthPolicy, error) {
	switch {
	case g.Grace < 0:
		return g, fmt.Errorf("%w: Growth.Grace: must not be negative, got %v", ErrConfig, g.Grace)
	case g.HealthAge < 0:
		return g, fmt.Errorf("%w: Growth.HealthAge: must not be negative, got %v", ErrConfig, g.HealthAge)
	}
	orDefault(&g.Grace, DefaultGrowthGrace)
	orDefault(&g.HealthAge, DefaultGrowthHealthAge)
	return g, nil
}
