package integration

import (
	"github.com/lanesdev/lanes/eventid"
	"github.com/twmb/franz-go/pkg/kgo"
)

func header(r *kgo.Record, k string) string {
	v, _ := eventid.Header(r, k)
	return v
}
