// Package redisdedup is a dedup.Store on Redis: a key per (group, event
// ID), claimed with SET NX and an expiry (the claim's TTL), overwritten
// with "done" and the store's DoneTTL when the handler succeeded, deleted
// by its holder (a compare-and-delete script) when the handler failed.
//
// Use it with the dedup middleware:
//
//	store, _ := redisdedup.New(redisdedup.Config{Client: redis.NewClient(&redis.Options{Addr: addr})})
//	d, _ := dedup.New(dedup.Config{Store: store, Group: "payments"})
//	// consumer.Config{..., Middleware: []consumer.Middleware{d.Middleware}}
//
// The guarantee is the dedup package's: effects at least once per event
// ID, repeated only when a handler applied its effect and did not get to
// mark it done (see github.com/lanesdev/lanes/dedup). Redis must keep what
// it acknowledged for that to hold across a Redis restart: with
// persistence off, a restart forgets every done mark and the next
// redeliveries run again. A Redis Cluster works: each key lives on one
// node.
package redisdedup
