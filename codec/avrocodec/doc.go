// Package avrocodec is the lanes codec for Avro (github.com/twmb/avro): a
// [Codec] for a Go type and its Avro schema encodes and decodes plain Avro
// binary for codec.Typed and codec.Send, and is the Avro format of srcodec
// (the Confluent schema-registry wire format), where it reads data written
// with an older or newer writer schema through Avro schema resolution
// (fields added with defaults, fields removed, promoted types).
//
// Why github.com/twmb/avro rather than github.com/hamba/avro/v2: both
// resolve and both decode by reflection with `avro` struct tags and do
// schema resolution; twmb/avro needs one dependency (klauspost/compress,
// already in every franz-go build) where hamba/avro brings json-iterator,
// reflect2, mapstructure, snappy and more, and it comes from franz-go's
// author, whose pkg/sr carries the registry side. See
// https://github.com/lanesdev/lanes/blob/main/docs/codecs.md#why-twmbavro-and-not-hambaavro.
//
// It is a module of its own so that programs that do not use Avro do not
// build it.
package avrocodec
