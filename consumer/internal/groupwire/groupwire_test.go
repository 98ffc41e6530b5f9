package groupwire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wire is a connection's far side: what franz-go wrote, and what the
// broker answers, read back in chunks of random sizes.
type wire struct {
	net.Conn // nil: only Read, Write and Close are used
	out      bytes.Buffer
	in       []byte
	rng      *rand.Rand
}

func (w *wire) Write(p []byte) (int, error) { return w.out.Write(p) }
func (w *wire) Close() error                { return nil }

func (w *wire) Read(p []byte) (int, error) {
	if len(w.in) == 0 {
		return 0, errors.New("wire: nothing more to read")
	}
	n := min(len(p), len(w.in), 1+w.rng.IntN(40))
	copy(p, w.in[:n])
	w.in = w.in[n:]
	return n, nil
}

// answer appends the frame of resp answering req, sent with correlation
// ID corr.
func (w *wire) answer(req kmsg.Request, corr int32, resp kmsg.Response) {
	resp.SetVersion(req.GetVersion())
	body := binary.BigEndian.AppendUint32(nil, uint32(corr))
	if req.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		body = append(body, 0) // no tagged fields in the header
	}
	body = resp.AppendTo(body)
	w.in = append(binary.BigEndian.AppendUint32(w.in, uint32(len(body))), body...)
}

type reports struct {
	mu  sync.Mutex
	got []Answer
}

func (r *reports) add(a Answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, a)
}

// TestWatchReportsErrorCodes writes watched and other requests through a
// watched connection, reads their answers back in random chunks, and
// checks that exactly the watched ones are reported, each with its own
// error code and send time, in order.
func TestWatchReportsErrorCodes(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		w := &wire{rng: rng}
		var r reports
		clock := time.Unix(1_700_000_000, 0)
		dial := Watch(func(context.Context, string, string) (net.Conn, error) { return w, nil }, r.add,
			func() time.Time { return clock }, int16(kmsg.Heartbeat), int16(kmsg.ConsumerGroupHeartbeat), int16(kmsg.SyncGroup))
		c, err := dial(context.Background(), "tcp", "broker:9092")
		if err != nil {
			t.Fatal(err)
		}
		f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("lanes-test"))
		type sent struct {
			key  int16
			code int16
			at   time.Time
		}
		var want []sent
		codes := []int16{0, kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code, kerr.RebalanceInProgress.Code, kerr.FencedMemberEpoch.Code}
		for corr := range int32(60) {
			clock = clock.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
			code := codes[rng.IntN(len(codes))]
			var req kmsg.Request
			var resp kmsg.Response
			switch rng.IntN(5) {
			case 0:
				hb := kmsg.NewPtrHeartbeatRequest()
				hb.Version = int16(rng.IntN(5))
				req, resp = hb, &kmsg.HeartbeatResponse{ErrorCode: code}
			case 1:
				hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				hb.Version = int16(rng.IntN(2))
				a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
				a.Topics = make([]kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic, rng.IntN(30))
				req, resp = hb, &kmsg.ConsumerGroupHeartbeatResponse{ErrorCode: code, MemberEpoch: 7, Assignment: &a}
			case 2:
				sg := kmsg.NewPtrSyncGroupRequest()
				sg.Version = int16(rng.IntN(6))
				req, resp = sg, &kmsg.SyncGroupResponse{ErrorCode: code, MemberAssignment: make([]byte, rng.IntN(3000))}
			default: // not watched: a fetch answered with a large body
				fr := kmsg.NewPtrFetchRequest()
				fr.Version = 12
				fresp := kmsg.NewPtrFetchResponse()
				tp := kmsg.NewFetchResponseTopic()
				p := kmsg.NewFetchResponseTopicPartition()
				p.RecordBatches = make([]byte, rng.IntN(100_000))
				tp.Partitions = append(tp.Partitions, p)
				fresp.Topics = append(fresp.Topics, tp)
				req, resp = fr, fresp
			}
			if _, err := c.Write(f.AppendRequest(nil, req, corr)); err != nil {
				t.Fatal(err)
			}
			w.answer(req, corr, resp)
			if k := req.Key(); k != int16(kmsg.Fetch) {
				want = append(want, sent{key: k, code: code, at: clock})
			}
		}
		drain(c)
		if len(r.got) != len(want) {
			t.Fatalf("seed %d: %d answers reported, want %d", seed, len(r.got), len(want))
		}
		for i, a := range r.got {
			if a.Key != want[i].key || !a.Sent.Equal(want[i].at) || !errors.Is(a.Err, kerr.ErrorForCode(want[i].code)) && (a.Err != nil || want[i].code != 0) {
				t.Fatalf("seed %d: answer %d = %+v, want key %d code %d sent %v", seed, i, a, want[i].key, want[i].code, want[i].at)
			}
		}
	}
}

// TestWatchUndecodable: a watched request's answer too short to decode is
// reported undecodable, never as a success, and the frames after it are
// still followed.
func TestWatchUndecodable(t *testing.T) {
	w := &wire{rng: rand.New(rand.NewPCG(1, 2))}
	var r reports
	dial := Watch(func(context.Context, string, string) (net.Conn, error) { return w, nil }, r.add, time.Now, int16(kmsg.Heartbeat))
	c, _ := dial(context.Background(), "tcp", "b:1")
	f := kmsg.NewRequestFormatter()
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version = 4
	for corr := range int32(2) {
		if _, err := c.Write(f.AppendRequest(nil, hb, corr)); err != nil {
			t.Fatal(err)
		}
	}
	w.in = binary.BigEndian.AppendUint32(w.in, 5) // corr 0, then one byte: no throttle, no error code
	w.in = binary.BigEndian.AppendUint32(w.in, 0)
	w.in = append(w.in, 0)
	w.answer(hb, 1, &kmsg.HeartbeatResponse{ErrorCode: kerr.NotCoordinator.Code})
	drain(c)
	if len(r.got) != 2 || !errors.Is(r.got[0].Err, ErrUndecodable) || !errors.Is(r.got[1].Err, kerr.NotCoordinator) {
		t.Fatalf("answers %+v, want one undecodable then NOT_COORDINATOR", r.got)
	}
}

// TestWatchBounds: requests past maxPending forget the oldest (its answer
// is then not reported, the others are), and an answer larger than
// maxKept is reported undecodable, its buffer not kept past it.
func TestWatchBounds(t *testing.T) {
	w := &wire{rng: rand.New(rand.NewPCG(3, 4))}
	var r reports
	dial := Watch(func(context.Context, string, string) (net.Conn, error) { return w, nil }, r.add, time.Now, int16(kmsg.SyncGroup))
	c, _ := dial(context.Background(), "tcp", "b:1")
	f := kmsg.NewRequestFormatter()
	sg := kmsg.NewPtrSyncGroupRequest()
	sg.Version = 5
	for corr := range int32(maxPending + 1) {
		if _, err := c.Write(f.AppendRequest(nil, sg, corr)); err != nil {
			t.Fatal(err)
		}
	}
	w.answer(sg, 0, &kmsg.SyncGroupResponse{}) // forgotten: not reported
	for corr := int32(1); corr <= maxPending; corr++ {
		assignment := []byte(nil)
		if corr == 2 {
			assignment = make([]byte, maxKept)
		}
		w.answer(sg, corr, &kmsg.SyncGroupResponse{MemberAssignment: assignment})
	}
	drain(c)
	if len(r.got) != maxPending {
		t.Fatalf("%d answers reported, want %d", len(r.got), maxPending)
	}
	for i, a := range r.got {
		want := error(nil)
		if i == 1 {
			want = ErrUndecodable
		}
		if a.Key != int16(kmsg.SyncGroup) || !errors.Is(a.Err, want) || (want == nil && a.Err != nil) {
			t.Fatalf("answer %d: %+v, want a sync answered with %v", i, a, want)
		}
	}
	if n := cap(c.(*conn).kept); n > keepCap {
		t.Fatalf("the connection keeps a buffer of %d bytes after the large answer, want at most %d", n, keepCap)
	}
}

// TestWatchRawToken: a raw SASL v0 token (a length, then the bytes, no
// request header) whose first bytes read as a watched key but whose
// "version" that key does not have is not taken for a request, so a frame
// that would answer it, all zeros past its "correlation ID" (which would
// decode as a KIP-848 heartbeat answered with no error), is not reported.
func TestWatchRawToken(t *testing.T) {
	w := &wire{rng: rand.New(rand.NewPCG(5, 6))}
	var r reports
	dial := Watch(func(context.Context, string, string) (net.Conn, error) { return w, nil }, r.add, time.Now, int16(kmsg.ConsumerGroupHeartbeat))
	c, _ := dial(context.Background(), "tcp", "b:1")
	// PLAIN's "\x00Dave\x00pwd!": "\x00D" is 68, ConsumerGroupHeartbeat's
	// key; "av" is its "version"; "e\x00pw" its "correlation ID".
	raw := append(binary.BigEndian.AppendUint32(nil, 10), 0, 'D', 'a', 'v', 'e', 0, 'p', 'w', 'd', '!')
	if _, err := c.Write(raw); err != nil {
		t.Fatal(err)
	}
	body := append([]byte{'e', 0, 'p', 'w'}, make([]byte, 32)...)
	w.in = append(binary.BigEndian.AppendUint32(w.in, uint32(len(body))), body...)
	drain(c)
	if len(r.got) != 0 {
		t.Fatalf("a raw token's bytes taken for a request: %+v reported", r.got)
	}
}

// drain reads c until the far side has nothing more.
func drain(c net.Conn) {
	buf := make([]byte, 1<<16)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}
