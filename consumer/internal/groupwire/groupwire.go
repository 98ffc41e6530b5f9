package groupwire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Answer is the coordinator's answer to one watched request.
type Answer struct {
	Key  int16     // the request's kmsg key
	Sent time.Time // when the request was written
	// Err is the answer's error code as a kerr error (nil: none), or
	// ErrUndecodable.
	Err error
}

// ErrUndecodable is an answer's Err when its frame could not be decoded:
// it says nothing about how the request went.
var ErrUndecodable = errors.New("groupwire: answer not decodable")

// Dial is the dial function of kgo.Dialer.
type Dial = func(ctx context.Context, network, host string) (net.Conn, error)

// maxKept bounds an answer kept to be decoded: a KIP-848 heartbeat's
// carries the member's assignment (4 bytes a partition). A bigger one is
// reported undecodable.
const maxKept = 1 << 20

// keepCap is the most buffer a connection keeps between answers.
const keepCap = 4 << 10

// maxPending bounds the requests a connection remembers awaiting their
// answer; past it, the oldest are forgotten (never reported).
const maxPending = 64

// Watch returns dial with each connection it makes reporting the answers
// to requests of keys to report, on the goroutine reading the connection.
// now is time.Now unless a test sets its own.
func Watch(dial Dial, report func(Answer), now func() time.Time, keys ...int16) Dial {
	w := &watch{report: report, now: now, keys: map[int16]int16{}}
	for _, k := range keys {
		if req := kmsg.RequestForKey(k); req != nil { // a key kmsg does not know is never seen
			w.keys[k] = req.MaxVersion()
		}
	}
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		c, err := dial(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return &conn{Conn: c, w: w}, nil
	}
}

type watch struct {
	report func(Answer)
	now    func() time.Time
	keys   map[int16]int16 // the keys watched, each with its highest version
}

// request is a watched request written and not yet answered.
type request struct {
	corr         int32
	key, version int16
	sent         time.Time
}

// conn notes the watched requests written (Write) and finds their answers
// among the frames read (Read).
type conn struct {
	net.Conn
	w *watch

	mu      sync.Mutex
	pending []request // oldest first

	// The read side: franz-go reads a connection from one goroutine at a
	// time.
	size   [4]byte
	nsize  int
	left   int // the current frame's bytes not read yet
	corr   [4]byte
	ncorr  int
	answer *request // the watched request the current frame answers
	kept   []byte   // its frame past the correlation ID
}

// Write notes a watched request: franz-go writes each request whole, in
// one Write (size, key, version, correlation ID first). A frame whose
// version the key does not have is no request (a raw SASL v0 token).
func (c *conn) Write(p []byte) (int, error) {
	if len(p) >= 12 && int(binary.BigEndian.Uint32(p)) == len(p)-4 {
		key, version := int16(binary.BigEndian.Uint16(p[4:])), int16(binary.BigEndian.Uint16(p[6:]))
		if top, ok := c.w.keys[key]; ok && version >= 0 && version <= top {
			r := request{key: key, version: version, corr: int32(binary.BigEndian.Uint32(p[8:])), sent: c.w.now()}
			c.mu.Lock()
			if len(c.pending) == maxPending {
				c.pending = append(c.pending[:0], c.pending[1:]...)
			}
			c.pending = append(c.pending, r)
			c.mu.Unlock()
		}
	}
	return c.Conn.Write(p)
}

// Read passes what it reads through scan.
func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.scan(p[:n])
	return n, err
}

// scan follows the frames read: a length, then that many bytes, the
// first four the correlation ID. The frame of a watched request's answer
// is kept and, once read whole, decoded and reported.
func (c *conn) scan(b []byte) {
	for len(b) > 0 {
		if c.left == 0 { // a frame's length
			k := copy(c.size[c.nsize:], b)
			c.nsize, b = c.nsize+k, b[k:]
			if c.nsize < 4 {
				return
			}
			if cap(c.kept) > keepCap {
				c.kept = nil // a large answer's buffer is not kept for the connection's life
			}
			c.nsize, c.ncorr, c.answer, c.kept = 0, 0, nil, c.kept[:0]
			c.left = max(0, int(int32(binary.BigEndian.Uint32(c.size[:]))))
			continue
		}
		k := min(len(b), c.left)
		chunk := b[:k]
		b, c.left = b[k:], c.left-k
		if c.ncorr < 4 {
			j := copy(c.corr[c.ncorr:], chunk)
			c.ncorr, chunk = c.ncorr+j, chunk[j:]
			if c.ncorr == 4 {
				c.answer = c.take(int32(binary.BigEndian.Uint32(c.corr[:])))
			}
		}
		if c.answer == nil {
			continue
		}
		if len(c.kept)+len(chunk) > maxKept {
			c.w.report(Answer{Key: c.answer.key, Sent: c.answer.sent, Err: ErrUndecodable})
			c.answer = nil
			continue
		}
		c.kept = append(c.kept, chunk...)
		if c.left == 0 {
			c.w.report(Answer{Key: c.answer.key, Sent: c.answer.sent, Err: decode(*c.answer, c.kept)})
			c.answer = nil
		}
	}
}

// take removes and returns the pending request with correlation ID corr,
// nil when none (the frame answers a request not watched).
func (c *conn) take(corr int32) *request {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, r := range c.pending {
		if r.corr == corr {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			return &r
		}
	}
	return nil
}

// decode reads the error code of the answer to r, its frame past the
// correlation ID.
func decode(r request, frame []byte) error {
	req := kmsg.RequestForKey(r.key)
	if req == nil {
		return ErrUndecodable
	}
	req.SetVersion(r.version)
	body := frame
	if req.IsFlexible() { // response header v1: tagged fields
		rd := kbin.Reader{Src: frame}
		kmsg.SkipTags(&rd)
		if !rd.Ok() {
			return ErrUndecodable
		}
		body = rd.Src
	}
	resp := req.ResponseKind()
	resp.SetVersion(r.version)
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("%w: %w", ErrUndecodable, err)
	}
	var code int16
	switch a := resp.(type) {
	case *kmsg.HeartbeatResponse:
		code = a.ErrorCode
	case *kmsg.ConsumerGroupHeartbeatResponse:
		code = a.ErrorCode
	case *kmsg.SyncGroupResponse:
		code = a.ErrorCode
	case *kmsg.JoinGroupResponse:
		code = a.ErrorCode
	default:
		return ErrUndecodable
	}
	return kerr.ErrorForCode(code)
}
