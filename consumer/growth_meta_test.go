package consumer

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGrowMetaSections: the growth section sits between the completed
// offsets and the park section; each reader finds its own part, with or
// without the others.
func TestGrowMetaSections(t *testing.T) {
	park := ";park2:7,3,2,classic,ab,"
	for _, tc := range []struct {
		meta, offsets string
		counts        []int
		floors        []int64
		parked        parkedOld
		park          bool
	}{
		{meta: ";grow1:8", counts: []int{8}},
		{meta: "lanes1:AQIAAQID;grow1:2,8@1000:5", offsets: "lanes1:AQIAAQID", counts: []int{2, 8}, floors: []int64{5}},
		{meta: "lanes1:AQIAAQID;grow1:8!" + park, offsets: "lanes1:AQIAAQID", counts: []int{8}, park: true},
		{meta: ";grow1:2,4,8@1000:5,9" + park, counts: []int{2, 4, 8}, floors: []int64{5, 9}, park: true},
		{meta: ";grow1:2,8@1000:5:1f@2,a0b1c2d3@0" + park, counts: []int{2, 8}, floors: []int64{5}, parked: parkedOld{named: []parkedAt{{0x1f, 2}, {0xa0b1c2d3, 0}}}, park: true},
		{meta: "lanes1:AQIAAQID;grow1:2,8@1000:5:*@2", offsets: "lanes1:AQIAAQID", counts: []int{2, 8}, floors: []int64{5}, parked: parkedOld{all: true, level: 2}},
	} {
		rest, _, parked := splitParkMeta(tc.meta)
		if rest != tc.offsets || parked != tc.park {
			t.Errorf("splitParkMeta(%q) = %q, park %v; want %q, %v", tc.meta, rest, parked, tc.offsets, tc.park)
		}
		gc, ok := splitGrowMeta(tc.meta)
		if !ok || !slices.Equal(gc.hist.Counts, tc.counts) || !slices.Equal(gc.floors, tc.floors) ||
			gc.parked.all != tc.parked.all || gc.parked.level != tc.parked.level || !slices.Equal(gc.parked.named, tc.parked.named) {
			t.Errorf("splitGrowMeta(%q) = %+v, %v", tc.meta, gc, ok)
		}
		if got := growMeta(gc.hist, gc.floors, gc.parked); got != growSection(tc.meta) {
			t.Errorf("growMeta of %q = %q, want %q", tc.meta, got, growSection(tc.meta))
		}
	}
	for _, bad := range []string{";grow1:2,8@1000", ";grow1:8:5", ";grow1:2,8@1000:5,6", ";grow1:x", ";grow1:2,8@1000:-1",
		";grow1:2,8@1000:5:", ";grow1:2,8@1000:5:b@2,a@2", ";grow1:2,8@1000:5:123456789@2", ";grow1:2,8@1000:5:*,1",
		";grow1:2,8@1000:5:*", ";grow1:2,8@1000:5:1f", ";grow1:2,8@1000:5:1f@-1", ";grow1:2,8@1000:5:*@x"} {
		if gc, ok := splitGrowMeta(bad); ok {
			t.Errorf("splitGrowMeta(%q) = %+v, want not read", bad, gc)
		}
	}
}

// TestAdjustStarts: an added partition is read from the start listed for
// it, once; a start not applied before the partition is given up is
// dropped, so a later assignment keeps its committed offset.
func TestAdjustStarts(t *testing.T) {
	c := unstarted(t, nil)
	p3, p4 := &partition{key: partKey{"t", 3}}, &partition{key: partKey{"t", 4}}
	c.readFromStart([]*partition{p3, p4}, kadm.ListedOffsets{"t": {
		3: {Topic: "t", Partition: 3, Offset: 7},
		4: {Topic: "t", Partition: 4, Offset: 9},
	}})
	c.growForget([]*partition{p4}) // revoked before the client fetched its offsets
	committed := kgo.NewOffset().At(42)
	offs := map[string]map[int32]kgo.Offset{"t": {3: kgo.NewOffset().AtEnd(), 4: committed}}
	got, err := c.adjustStarts(context.Background(), offs)
	if err != nil {
		t.Fatal(err)
	}
	if want := kgo.NewOffset().At(7).WithEpoch(-1); got["t"][3] != want {
		t.Errorf("added partition 3 starts at %v, want %v", got["t"][3], want)
	}
	if got["t"][4] != committed {
		t.Errorf("partition 4, given up before, starts at %v, want its commit %v", got["t"][4], committed)
	}
	again, _ := c.adjustStarts(context.Background(), map[string]map[int32]kgo.Offset{"t": {3: committed}})
	if again["t"][3] != committed {
		t.Errorf("a start is applied once: the next assignment of partition 3 starts at %v", again["t"][3])
	}
}
