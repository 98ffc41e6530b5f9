package consumer

// Defaults shared by the config policies and the clients.

// Kafka's default max.message.bytes, the DLQ limit when the topic's own
// cannot be read; recordOverhead is a generous bound on what a record batch
// holding one record adds to its key, value and headers (a DLQ topic's
// limit read at or below it is not taken).
const (
	defaultMaxMessageBytes = 1048588
	recordOverhead         = 512
)

// orDefault sets *v to def when it is the zero value.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
