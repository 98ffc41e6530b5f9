package producer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/eventid"
	"github.com/lanesdev/lanes/hashring"
)

// TestPlacementStamped: every record carries the placement it was made
// by, the scheme and the count hashed over, and that placement names the
// partition it landed on; after the topic grows, the stamp says the new
// count (the consumer's hold of moved sessions rests on it).
func TestPlacementStamped(t *testing.T) {
	for _, tc := range []struct {
		part   Partitioning
		scheme hashring.Scheme
	}{{PartitionKafka, hashring.SchemeKafka}, {PartitionJump, hashring.SchemeJump}} {
		t.Run(hashring.Placement{Scheme: tc.scheme, Count: 1}.String(), func(t *testing.T) {
			c := cluster(t, 2, "chat")
			p := newProducer(t, Config{Brokers: c.ListenAddrs(), Topic: "chat", Partitioning: tc.part,
				ClientOptions: []kgo.Opt{kgo.MetadataMinAge(10 * time.Millisecond), kgo.MetadataMaxAge(50 * time.Millisecond)}})
			ctx := context.Background()
			send := func(round int) {
				for i := range 20 {
					if _, err := p.Send(ctx, fmt.Sprintf("s-%d", i), []byte(fmt.Sprint(round))); err != nil {
						t.Fatal(err)
					}
				}
			}
			send(0)
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if _, err := kadm.NewClient(cl).CreatePartitions(ctx, 6, "chat"); err != nil {
				t.Fatal(err)
			}
			probes := 0 // until one lands on a new partition: the producer hashes over 8 from then on
			for ; ; probes++ {
				res, err := p.Send(ctx, fmt.Sprintf("probe-%d", probes), []byte("probe"))
				if err != nil {
					t.Fatal(err)
				}
				if res.Partition >= 2 {
					break
				}
				if probes > 10_000 {
					t.Fatal("the producer never placed a record on a new partition")
				}
			}
			send(1)
			recs := readAll(t, c, "chat", 40+probes+1)
			for _, r := range recs {
				v, ok := eventid.Header(r, hashring.HeaderPlacement)
				pl, err := hashring.ParsePlacement([]byte(v))
				if !ok || err != nil || pl.Scheme != tc.scheme {
					t.Fatalf("record %s/%d@%d: placement %q (%v)", r.Topic, r.Partition, r.Offset, v, err)
				}
				want, ok := map[string]int{"0": 2, "1": 8}[string(r.Value)]
				if ok && pl.Count != want || !ok && pl.Count != 2 && pl.Count != 8 {
					t.Fatalf("record of round %s stamped %v, want count %d", r.Value, pl, want)
				}
				if q, _ := pl.Partition(r.Key, pl.Count); int32(q) != r.Partition {
					t.Fatalf("record of %s on partition %d, its stamp %v places it on %d", r.Key, r.Partition, pl, q)
				}
			}
		})
	}
}
