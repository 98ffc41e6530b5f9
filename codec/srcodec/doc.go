// Package srcodec is the lanes codec for the Confluent schema-registry
// wire format, through franz-go's pkg/sr: each payload is a magic byte 0,
// the schema's registry ID as a 4-byte big-endian integer, for protobuf the
// message indexes of the type in its .proto file (zig-zag varints: a count,
// then each index; a single 0 byte for [0]), then the value's bytes.
//
// A [Codec] wraps a [Format] (avrocodec.Codec or protocodec.Codec, or any
// type with the same methods) and a registry client. On its first encode it
// registers the format's schema under its subject (once; the ID is kept).
// On decode it reads the writer's schema ID, fetches that schema from the
// registry once per ID and decodes with it: for Avro the writer's schema is
// resolved to the reader's, so a reader with a newer schema reads older
// data (and the reverse, as far as Avro resolution allows).
//
// Failures follow the codec module's contract: a payload without the
// header, a schema ID the registry does not know (error code 40403), a
// writer schema of another type or that does not resolve, or bytes that do
// not decode, wrap codec.ErrDecode (codec.Typed dead-letters the record at
// once with reason "decode"); a registry that cannot be reached, times
// out or answers with any other error wraps codec.ErrUnavailable, and the
// record is retried in its lane until the registry answers.
//
// This module needs only pkg/sr (which has no dependency of its own) and
// the codec module; the Avro and protobuf formats come with their own
// modules, so a program builds only the format it uses.
package srcodec
