package hashring

import "github.com/cespare/xxhash/v2"

// Sum64 returns the 64-bit hash of a session ID: xxhash64 of its UTF-8 bytes.
// It is the hash every lanes placement starts from. The empty string is a
// valid key and hashes like any other (to 0xef46db3751d8e999).
func Sum64(key string) uint64 { return xxhash.Sum64String(key) }

// Sum64Bytes is [Sum64] for a key held as bytes; it does not allocate.
func Sum64Bytes(key []byte) uint64 { return xxhash.Sum64(key) }
