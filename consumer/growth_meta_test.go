package consumer

import (
	"slices"
	"testing"
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
		park          bool
	}{
		{meta: ";grow1:8", counts: []int{8}},
		{meta: "lanes1:AQIAAQID;grow1:2,8@1000:5", offsets: "lanes1:AQIAAQID", counts: []int{2, 8}, floors: []int64{5}},
		{meta: "lanes1:AQIAAQID;grow1:8!" + park, offsets: "lanes1:AQIAAQID", counts: []int{8}, park: true},
		{meta: ";grow1:2,4,8@1000:5,9" + park, counts: []int{2, 4, 8}, floors: []int64{5, 9}, park: true},
	} {
		rest, _, parked := splitParkMeta(tc.meta)
		if rest != tc.offsets || parked != tc.park {
			t.Errorf("splitParkMeta(%q) = %q, park %v; want %q, %v", tc.meta, rest, parked, tc.offsets, tc.park)
		}
		gc, ok := splitGrowMeta(tc.meta)
		if !ok || !slices.Equal(gc.hist.Counts, tc.counts) || !slices.Equal(gc.floors, tc.floors) {
			t.Errorf("splitGrowMeta(%q) = %+v, %v", tc.meta, gc, ok)
		}
		if got := growMeta(gc.hist, gc.floors); got != growSection(tc.meta) {
			t.Errorf("growMeta of %q = %q, want %q", tc.meta, got, growSection(tc.meta))
		}
	}
	for _, bad := range []string{";grow1:2,8@1000", ";grow1:8:5", ";grow1:2,8@1000:5,6", ";grow1:x", ";grow1:2,8@1000:-1"} {
		if gc, ok := splitGrowMeta(bad); ok {
			t.Errorf("splitGrowMeta(%q) = %+v, want not read", bad, gc)
		}
	}
}
