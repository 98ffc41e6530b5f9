// Package testpb holds the protobuf messages srcodec's tests and examples
// use. Regenerate shop.pb.go with
//
//	protoc --go_out=. --go_opt=paths=source_relative shop.proto
//
// (protoc-gen-go v1.36.12 on PATH).
package testpb

import _ "embed"

// ShopProto is shop.proto's text, the schema registered for its messages.
//
//go:embed shop.proto
var ShopProto string
