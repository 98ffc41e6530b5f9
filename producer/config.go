package producer

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/lanesdev/lanes/tracing"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Partitioning chooses how a session ID maps to a partition.
type Partitioning int

const (
	// PartitionKafka (the default) is Kafka's default partitioner for keyed
	// records: murmur2(session) mod partitions, via franz-go. The Java
	// client, and any client configured like it, puts a session on the same
	// partition. librdkafka (CRC32 by default) and Sarama (FNV-1a) do not
	// unless configured to use murmur2.
	PartitionKafka Partitioning = iota
	// PartitionJump is jump consistent hashing over the partition count
	// (hashring.JumpPartition): when partitions are added, only about
	// 1/(n+1) of the sessions move, instead of most of them. Every producer
	// writing a session's messages must use the same choice.
	PartitionJump
)

// Config configures a Producer. Zero values mean the documented defaults.
//
// The fields come in the order a service needs them: Brokers and Topic,
// logging, how sessions map to partitions, traces and metrics, franz-go's
// options (TLS, SASL), and last the Tuning fields, whose defaults suit most
// services; each of those names the Default* constant its zero value
// means.
type Config struct {
	// Brokers are the seed brokers, host:port. Required.
	Brokers []string
	// Topic is where a message goes unless its send names another with
	// WithTopic: one producer serves every topic of a service, and a
	// session is hashed the same way whatever the topic. Default: none;
	// then every send must use WithTopic (one that does not fails with
	// ErrNoTopic).
	Topic string
	// Slog receives the producer's log lines: failed deliveries (Warn, at
	// most one every 30 s per topic and kind of failure) and franz-go's
	// warnings and errors (a broker that cannot be dialled). Default:
	// slog.Default() as it is when each line is logged (until
	// slog.SetDefault, the log package's stderr, INFO and above). To log
	// nothing, set slog.New(slog.DiscardHandler).
	Slog *slog.Logger
	// Partitioning picks the partitioner. Default: PartitionKafka.
	Partitioning Partitioning
	// AllowNilValues lets Send accept a nil value, which Kafka stores as a
	// tombstone (a delete marker in compacted topics). Default: false, a
	// nil value is rejected with ErrNilValue; an empty non-nil value is
	// always accepted.
	AllowNilValues bool

	// Traces and metrics (OpenTelemetry).
	//
	// TracerProvider creates a "send" span (PRODUCER) per message and its
	// context is written into the record's headers. Default:
	// otel.GetTracerProvider(), a no-op until the application sets one.
	TracerProvider trace.TracerProvider
	// Propagator writes trace context into headers. Default: W3C trace
	// context (traceparent, tracestate).
	Propagator propagation.TextMapPropagator
	// MeterProvider receives the producer's metrics: send latency, sent and
	// failed messages. Default: otel.GetMeterProvider().
	MeterProvider metric.MeterProvider

	// ClientOptions are passed to franz-go after lanes' own options: TLS,
	// SASL, linger, compression. Options that change the partitioner or
	// turn off idempotence would break per-session order.
	ClientOptions []kgo.Opt

	// Tuning: the defaults suit most services. The zero value of each
	// field is the Default* constant its doc names.
	//
	// DeliveryTimeout bounds how long a message may take to be
	// acknowledged, retries included; past it the send fails. Default:
	// [DefaultDeliveryTimeout].
	DeliveryTimeout time.Duration
	// CloseTimeout bounds how long Close waits for buffered messages to be
	// delivered before failing the rest. Default: [DefaultCloseTimeout].
	CloseTimeout time.Duration
	// Linger is how long franz-go holds a partition's batch open for more
	// records before sending it. Default: [DefaultLinger], no wait: a
	// synchronous Send (inside a request, say) is sent at once, and records
	// still batch while earlier requests are in flight. franz-go's own
	// default is 10ms, which every Send would pay; a producer used only
	// through SendAsync at a high rate may set a few milliseconds to send
	// fewer, larger batches. A kgo.ProducerLinger in ClientOptions wins.
	Linger time.Duration
	// MaxMessageBytes is the largest value the producer accepts, checked
	// before sending; keep it at or below the topic's max.message.bytes.
	// Default: [DefaultMaxMessageBytes] (franz-go's batch limit, just under
	// Kafka's default message.max.bytes).
	MaxMessageBytes int

	// Logger is the zerolog alternative to Slog (set one of them, not
	// both).
	//
	// Deprecated: set Slog; a zerolog logger goes there as
	// slog.New(zerolog.NewSlogHandler(l)). Logger will be removed.
	Logger *zerolog.Logger
}

// Defaults of the Config tuning fields, applied by New to zero fields.
const (
	DefaultDeliveryTimeout               = 30 * time.Second
	DefaultCloseTimeout                  = 10 * time.Second
	DefaultLinger          time.Duration = 0
	DefaultMaxMessageBytes               = 1_000_000
)

func (cfg Config) validate() (Config, error) {
	bad := func(field, format string, args ...any) (Config, error) {
		return cfg, fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
	}
	if len(cfg.Brokers) == 0 {
		return bad("Brokers", "at least one seed broker is required")
	}
	for i, b := range cfg.Brokers {
		if b == "" {
			return bad("Brokers", "entry %d is empty", i)
		}
	}
	if cfg.Partitioning != PartitionKafka && cfg.Partitioning != PartitionJump {
		return bad("Partitioning", "unknown value %d", cfg.Partitioning)
	}
	if cfg.DeliveryTimeout < 0 {
		return bad("DeliveryTimeout", "must not be negative, got %v", cfg.DeliveryTimeout)
	}
	if cfg.CloseTimeout < 0 {
		return bad("CloseTimeout", "must not be negative, got %v", cfg.CloseTimeout)
	}
	if cfg.Linger < 0 {
		return bad("Linger", "must not be negative, got %v", cfg.Linger)
	}
	if cfg.MaxMessageBytes < 0 {
		return bad("MaxMessageBytes", "must not be negative, got %d", cfg.MaxMessageBytes)
	}
	if cfg.DeliveryTimeout == 0 {
		cfg.DeliveryTimeout = DefaultDeliveryTimeout
	}
	if cfg.CloseTimeout == 0 {
		cfg.CloseTimeout = DefaultCloseTimeout
	}
	if cfg.MaxMessageBytes == 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.Slog != nil {
		if cfg.Logger != nil {
			return bad("Slog", "set Logger or Slog, not both")
		}
		l := tracing.FromSlog(cfg.Slog)
		cfg.Logger = &l
	}
	if cfg.Logger == nil {
		l := tracing.FromSlogDefault()
		cfg.Logger = &l
	}
	return cfg, nil
}
