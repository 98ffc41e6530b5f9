// Package codec gives lanes handlers and sends typed payloads: [Typed]
// decodes each message's value into a T before calling a handler, [Send]
// and [SendAsync] encode a T before sending it through a lanes producer.
//
// A [Codec] turns a T into bytes and back. This module has JSON (the
// standard library's encoding/json); protobuf, Avro and the Confluent
// schema-registry wire format live in modules of their own (protocodec,
// avrocodec, srcodec under this directory), so a program that uses JSON, or
// handles bytes itself, builds none of their dependencies.
//
// A payload that cannot be decoded is never retried: Typed returns
// consumer.Undecodable, and the consumer dead-letters the record at once
// with reason "decode" and the decode error in its lanes-dlq-error header.
// A codec that cannot decode now but may later (a schema registry that does
// not answer) returns an error wrapping [ErrUnavailable]: Typed returns it
// as it is, and the consumer retries it in the record's lane like any
// handler error, keeping the session's order.
//
// [The codecs guide] in the repository goes further; the module does
// not carry it.
//
// [The codecs guide]: https://github.com/lanesdev/lanes/blob/main/docs/codecs.md
package codec
