module github.com/lanesdev/lanes/codec/srcodec

go 1.26.0

require (
	github.com/lanesdev/lanes/codec v0.1.0
	github.com/twmb/franz-go/pkg/sr v1.8.0
)

replace (
	github.com/lanesdev/lanes/codec => ..
	github.com/lanesdev/lanes/codec/avrocodec => ../avrocodec
	github.com/lanesdev/lanes/codec/protocodec => ../protocodec
	github.com/lanesdev/lanes/consumer => ../../consumer
	github.com/lanesdev/lanes/eventid => ../../eventid
	github.com/lanesdev/lanes/hashring => ../../hashring
	github.com/lanesdev/lanes/lanestest => ../../lanestest
	github.com/lanesdev/lanes/producer => ../../producer
	github.com/lanesdev/lanes/tracing => ../../tracing
)
