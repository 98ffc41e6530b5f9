package offsets

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Commit metadata: the committed offset stays the contiguous watermark; the
// metadata string of the commit also lists the offsets completed above it,
// so that a restart skips them instead of running them again.
//
//	"lanes1:" + base64url(payload)
//	payload = version(1) | uvarint(watermark) | kind | body
//	kind 0 (ranges): uvarint(n), then n × (uvarint(gap), uvarint(len−1)),
//	                 gap = start − end of the previous range (first: start − watermark − 1)
//	kind 1 (bitset): uvarint(nbits), bytes; bit i set ⇔ watermark+1+i done
//
// The smaller body is written. When even that exceeds the size cap, only a
// prefix of the ranges (the lowest completed offsets) is written: the rest
// is simply processed again after a restart, which at-least-once allows.

const (
	metaPrefix  = "lanes1:"
	metaVersion = 1
	kindRanges  = 0
	kindBitset  = 1
	// metaMaxRanges bounds what a decoder accepts, against hostile input.
	metaMaxRanges = 1 << 20
)

var ErrBadMetadata = errors.New("consumer: commit metadata is not lanes metadata")

// Range is an inclusive range of completed offsets.
type Range struct{ Start, End int64 }

// Completed returns the finished offsets above the watermark as ranges,
// in increasing order: what a commit's metadata lists.
func (t *Tracker) Completed() []Range {
	var out []Range
	t.DoneAbove(func(o int64) {
		if n := len(out); n > 0 && out[n-1].End == o-1 {
			out[n-1].End = o
			return
		}
		out = append(out, Range{o, o})
	})
	return out
}

// EncodeMetadata returns the metadata for a commit at watermark wm with the
// given completed ranges, at most maxLen bytes long ("" when nothing is
// completed above the watermark or nothing fits).
func EncodeMetadata(wm int64, rs []Range, maxLen int) string {
	if len(rs) == 0 || wm < 0 {
		return ""
	}
	for n := len(rs); n > 0; n = n * 3 / 4 {
		s := metaPrefix + base64.RawURLEncoding.EncodeToString(encodePayload(wm, rs[:n]))
		if len(s) <= maxLen {
			return s
		}
	}
	return ""
}

func encodePayload(wm int64, rs []Range) []byte {
	head := binary.AppendUvarint([]byte{metaVersion}, uint64(wm))
	ranges := binary.AppendUvarint(append([]byte(nil), kindRanges), uint64(len(rs)))
	prev := wm
	for _, r := range rs {
		ranges = binary.AppendUvarint(ranges, uint64(r.Start-prev-1))
		ranges = binary.AppendUvarint(ranges, uint64(r.End-r.Start))
		prev = r.End
	}
	span := rs[len(rs)-1].End - wm // bits needed
	if bitsetLen := 1 + 10 + (span+7)/8; bitsetLen < int64(len(ranges)) {
		bits := make([]byte, (span+7)/8)
		for _, r := range rs {
			for o := r.Start; o <= r.End; o++ {
				i := o - wm - 1
				bits[i/8] |= 1 << (i % 8)
			}
		}
		b := binary.AppendUvarint(append([]byte(nil), kindBitset), uint64(span))
		return append(append(head, b...), bits...)
	}
	return append(head, ranges...)
}

// DecodeMetadata parses metadata written by EncodeMetadata. It returns the
// watermark it was written at and the completed ranges above it, or an
// error for anything else (foreign, corrupt or from a newer version).
func DecodeMetadata(s string) (int64, []Range, error) {
	rest, ok := strings.CutPrefix(s, metaPrefix)
	if !ok {
		return 0, nil, ErrBadMetadata
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) < 2 || b[0] != metaVersion {
		return 0, nil, fmt.Errorf("%w: bad encoding or version", ErrBadMetadata)
	}
	r := reader{b: b[1:]}
	wm := int64(r.uvarint())
	kind := r.byte()
	var rs []Range
	switch kind {
	case kindRanges:
		n := r.uvarint()
		if n > metaMaxRanges {
			return 0, nil, fmt.Errorf("%w: %d ranges", ErrBadMetadata, n)
		}
		prev := wm
		for i := uint64(0); i < n && r.err == nil; i++ {
			start := prev + 1 + int64(r.uvarint())
			end := start + int64(r.uvarint())
			if start <= prev || end < start {
				return 0, nil, fmt.Errorf("%w: ranges overflow", ErrBadMetadata)
			}
			rs = append(rs, Range{start, end})
			prev = end
		}
	case kindBitset:
		span := r.uvarint()
		bits := r.rest()
		if uint64(len(bits)) != (span+7)/8 {
			return 0, nil, fmt.Errorf("%w: bitset length", ErrBadMetadata)
		}
		for i := uint64(0); i < span; i++ {
			if bits[i/8]&(1<<(i%8)) == 0 {
				continue
			}
			o := wm + 1 + int64(i)
			if n := len(rs); n > 0 && rs[n-1].End == o-1 {
				rs[n-1].End = o
			} else {
				rs = append(rs, Range{o, o})
			}
		}
	default:
		return 0, nil, fmt.Errorf("%w: kind %d", ErrBadMetadata, kind)
	}
	if r.err != nil || wm < 0 || (kind == kindRanges && len(r.b) != 0) {
		return 0, nil, fmt.Errorf("%w: truncated or trailing bytes", ErrBadMetadata)
	}
	return wm, rs, nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > 1<<62 {
		r.err = ErrBadMetadata
		r.b = nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.err = ErrBadMetadata
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) rest() []byte {
	b := r.b
	r.b = nil
	return b
}

// Skipper remembers, for a newly assigned partition, the offsets completed
// before the restart. Records arrive in increasing offset order, so a cursor
// over the ranges is enough.
type Skipper struct {
	rs []Range
	i  int
}

// NewSkipper returns a skipper over rs, the ranges DecodeMetadata read.
func NewSkipper(rs []Range) Skipper { return Skipper{rs: rs} }

// Done reports whether offset was completed before; it advances the cursor.
func (s *Skipper) Done(offset int64) bool {
	for s.i < len(s.rs) && s.rs[s.i].End < offset {
		s.i++
	}
	return s.i < len(s.rs) && s.rs[s.i].Start <= offset
}
