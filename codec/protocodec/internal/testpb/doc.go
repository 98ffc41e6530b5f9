// Package testpb holds the protobuf messages protocodec's tests and
// examples use. Regenerate order.pb.go with
//
//	protoc --go_out=. --go_opt=paths=source_relative order.proto
//
// (protoc-gen-go v1.36.12 on PATH).
package testpb

import _ "embed"

// OrderProto is order.proto's text, the schema a registry is given.
//
//go:embed order.proto
var OrderProto string
