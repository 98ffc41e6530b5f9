// Package protocodec is the lanes codec for protobuf messages
// (google.golang.org/protobuf): a [Codec] for a generated message type
// encodes and decodes plain protobuf bytes for codec.Typed and codec.Send,
// and is the protobuf format of srcodec (the Confluent schema-registry wire
// format, with the message indexes of the type in its .proto file).
//
// It is a module of its own so that programs that do not use protobuf do
// not build it.
package protocodec
