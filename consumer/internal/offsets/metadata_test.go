package offsets

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestMetadataRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		wm   int64
		rs   []Range
	}{
		{"one", 100, []Range{{102, 102}}},
		{"ranges", 0, []Range{{2, 5}, {9, 9}, {20, 1000}}},
		{"dense (bitset)", 5000, func() []Range {
			var rs []Range
			for o := int64(5002); o < 5400; o += 2 {
				rs = append(rs, Range{o, o})
			}
			return rs
		}()},
	}
	for _, c := range cases {
		s := EncodeMetadata(c.wm, c.rs, 4096)
		if s == "" {
			t.Fatalf("%s: nothing encoded", c.name)
		}
		wm, rs, err := DecodeMetadata(s)
		if err != nil || wm != c.wm || !reflect.DeepEqual(rs, c.rs) {
			t.Fatalf("%s: decoded %d %v %v; want %d %v", c.name, wm, rs, err, c.wm, c.rs)
		}
		t.Logf("%s: %d ranges in %d bytes", c.name, len(c.rs), len(s))
	}
}

func TestMetadataSizeCap(t *testing.T) {
	var rs []Range
	rng := rand.New(rand.NewPCG(1, 2))
	o := int64(10)
	for i := 0; i < 5000; i++ {
		o += 2 + rng.Int64N(50)
		rs = append(rs, Range{o, o})
	}
	s := EncodeMetadata(0, rs, 512)
	if len(s) > 512 || s == "" {
		t.Fatalf("encoded %d bytes, cap 512", len(s))
	}
	_, got, err := DecodeMetadata(s)
	if err != nil || len(got) == 0 || !reflect.DeepEqual(got, rs[:len(got)]) {
		t.Fatalf("capped metadata must be a prefix of the ranges: %v", err)
	}
}

func TestMetadataRejectsForeign(t *testing.T) {
	for _, s := range []string{"", "member-1234", "lanes1:!!!", "lanes1:", "lanes1:AQ", "lanes1:Ag", /* version 2 */
		"lanes1:" + strings.Repeat("_", 40)} {
		if _, _, err := DecodeMetadata(s); err == nil {
			t.Errorf("DecodeMetadata(%q) accepted", s)
		}
	}
}

func FuzzDecodeMetadata(f *testing.F) {
	f.Add(EncodeMetadata(7, []Range{{9, 12}, {20, 20}}, 4096))
	f.Add("lanes1:AQA")
	f.Fuzz(func(t *testing.T, s string) {
		wm, rs, err := DecodeMetadata(s)
		if err != nil {
			return
		}
		prev := wm
		for _, r := range rs {
			if r.Start <= prev || r.End < r.Start {
				t.Fatalf("decoded invalid ranges %v above %d", rs, wm)
			}
			prev = r.End
		}
	})
}

func TestSkipper(t *testing.T) {
	s := Skipper{rs: []Range{{3, 4}, {8, 8}}}
	var got []int64
	for o := int64(0); o < 10; o++ {
		if s.Done(o) {
			got = append(got, o)
		}
	}
	if !reflect.DeepEqual(got, []int64{3, 4, 8}) {
		t.Fatalf("skipped %v", got)
	}
}
