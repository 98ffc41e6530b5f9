package srcodec_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanesdev/lanes/codec"
	"github.com/lanesdev/lanes/codec/avrocodec"
	"github.com/lanesdev/lanes/codec/protocodec"
	"github.com/lanesdev/lanes/codec/srcodec"
	"github.com/lanesdev/lanes/codec/srcodec/internal/testpb"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const userV1 = `{"type":"record","name":"User","namespace":"lanes.test","fields":[
	{"name":"name","type":"string"},
	{"name":"age","type":"int"}]}`

const userV2 = `{"type":"record","name":"User","namespace":"lanes.test","fields":[
	{"name":"name","type":"string"},
	{"name":"age","type":"long"},
	{"name":"email","type":"string","default":"unknown"}]}`

type UserV1 struct {
	Name string `avro:"name"`
	Age  int32  `avro:"age"`
}

type UserV2 struct {
	Name  string `avro:"name"`
	Age   int64  `avro:"age"`
	Email string `avro:"email"`
}

// registry is an in-memory schema registry (franz-go's srfake) that can be
// taken down: while down, or while refuse is above zero (counting down),
// it answers every request with 503.
type registry struct {
	*srfake.Registry
	down     atomic.Bool
	refuse   atomic.Int64
	requests atomic.Int64
}

func newRegistry(t testing.TB) (*registry, *sr.Client) {
	r := &registry{Registry: srfake.New()}
	r.Intercept(func(w http.ResponseWriter, _ *http.Request) bool {
		r.requests.Add(1)
		if r.down.Load() || (r.refuse.Load() > 0 && r.refuse.Add(-1) >= 0) {
			http.Error(w, `{"error_code":50301,"message":"registry down"}`, http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	t.Cleanup(r.Close)
	return r, client(t, r.URL())
}

func client(t testing.TB, url string) *sr.Client {
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	cl, err := sr.NewClient(sr.URLs(url), sr.HTTPClient(&http.Client{Transport: tr, Timeout: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// header checks b's wire-format header by hand: magic byte 0, the ID as
// 4 bytes big-endian, then want's bytes (message indexes); it returns the
// rest.
func header(t *testing.T, b []byte, id int, index []byte) []byte {
	t.Helper()
	if len(b) < 5+len(index) || b[0] != 0 || binary.BigEndian.Uint32(b[1:5]) != uint32(id) || !slices.Equal(b[5:5+len(index)], index) {
		t.Fatalf("payload % x: want 00, ID %d big-endian, then % x", b, id, index)
	}
	return b[5+len(index):]
}

func TestAvroRoundTrip(t *testing.T) {
	reg, cl := newRegistry(t)
	f := must(avrocodec.New[UserV1](userV1))
	c := must(srcodec.New(cl, srcodec.TopicSubject("users"), f))
	ctx := context.Background()
	b, err := c.Encode(ctx, UserV1{Name: "Al", Age: 30})
	if err != nil {
		t.Fatal(err)
	}
	s, ok := reg.GetSchema("users-value", 1)
	if !ok || s.Type != sr.TypeAvro || s.Schema.Schema != userV1 {
		t.Fatalf("registered %+v (%v), want the Avro schema under users-value", s, ok)
	}
	body := header(t, b, s.ID, nil)
	if want := []byte{0x04, 'A', 'l', 0x3c}; !slices.Equal(body, want) {
		t.Fatalf("body % x, want % x", body, want)
	}
	// The first encode registered; later ones reuse the ID.
	n := reg.requests.Load()
	if _, err := c.Encode(ctx, UserV1{Name: "Bo"}); err != nil || reg.requests.Load() != n {
		t.Fatalf("second encode: %v, %d more registry requests", err, reg.requests.Load()-n)
	}
	// A fresh codec (another process) reads it through the registry.
	r := must(srcodec.New(cl, "users-value", must(avrocodec.New[UserV1](userV1))))
	u, err := r.Decode(ctx, b)
	if err != nil || u != (UserV1{Name: "Al", Age: 30}) {
		t.Fatalf("decoded %+v, %v", u, err)
	}
}

func TestProtobufRoundTrip(t *testing.T) {
	reg, cl := newRegistry(t)
	ctx := context.Background()
	orders := must(srcodec.New(cl, "orders-value", protocodec.New[*testpb.Order](protocodec.WithSchema(testpb.ShopProto))))
	b, err := orders.Encode(ctx, &testpb.Order{Id: "o-1", Total: 42})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := reg.GetSchema("orders-value", 1)
	if s.Type != sr.TypeProtobuf || s.Schema.Schema != testpb.ShopProto {
		t.Fatalf("registered %+v", s)
	}
	// Order is the file's first message: indexes [0], written as one 0.
	body := header(t, b, s.ID, []byte{0})
	if want := []byte{0x0a, 3, 'o', '-', '1', 0x10, 42}; !slices.Equal(body, want) {
		t.Fatalf("body % x, want % x", body, want)
	}
	o, err := orders.Decode(ctx, b)
	if err != nil || !proto.Equal(o, &testpb.Order{Id: "o-1", Total: 42}) {
		t.Fatalf("decoded %v, %v", o, err)
	}

	// Cart.Line is nested in the second message: indexes [1, 0], written
	// as zig-zag varints: count 2 (0x04), 1 (0x02), 0 (0x00).
	lines := must(srcodec.New(cl, "lines-value", protocodec.New[*testpb.Cart_Line](protocodec.WithSchema(testpb.ShopProto))))
	b, err = lines.Encode(ctx, &testpb.Cart_Line{Sku: "tea", Qty: 2})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := lines.ID(ctx)
	header(t, b, id, []byte{0x04, 0x02, 0x00})
	l, err := lines.Decode(ctx, b)
	if err != nil || l.GetSku() != "tea" || l.GetQty() != 2 {
		t.Fatalf("decoded %v, %v", l, err)
	}

	// No schema text: nothing to register.
	bare := must(srcodec.New(cl, "bare-value", protocodec.New[*testpb.Order]()))
	if _, err := bare.Encode(ctx, &testpb.Order{}); !errors.Is(err, codec.ErrEncode) {
		t.Fatalf("encode without a schema: %v, want ErrEncode", err)
	}
}

// TestEvolution: v1 writes, a v2 reader (a field added with a default, int
// promoted to long) reads through the registry, and a v1 reader reads v2's
// writes (the new field skipped).
func TestEvolution(t *testing.T) {
	_, cl := newRegistry(t)
	ctx := context.Background()
	w1 := must(srcodec.New(cl, "users-value", must(avrocodec.New[UserV1](userV1))))
	w2 := must(srcodec.New(cl, "users-value", must(avrocodec.New[UserV2](userV2))))
	old := must(w1.Encode(ctx, UserV1{Name: "Al", Age: 30}))
	newer := must(w2.Encode(ctx, UserV2{Name: "Bo", Age: 41, Email: "bo@example.com"}))
	id1, _ := w1.ID(ctx)
	id2, _ := w2.ID(ctx)
	if id1 == id2 {
		t.Fatalf("v1 and v2 share schema ID %d", id1)
	}
	r2 := must(srcodec.New(cl, "users-value", must(avrocodec.New[UserV2](userV2))))
	if u, err := r2.Decode(ctx, old); err != nil || u != (UserV2{Name: "Al", Age: 30, Email: "unknown"}) {
		t.Fatalf("v2 reader, v1 data: %+v, %v", u, err)
	}
	if u, err := r2.Decode(ctx, newer); err != nil || u != (UserV2{Name: "Bo", Age: 41, Email: "bo@example.com"}) {
		t.Fatalf("v2 reader, v2 data: %+v, %v", u, err)
	}
	r1 := must(srcodec.New(cl, "users-value", must(avrocodec.New[UserV1](userV1))))
	if _, err := r1.Decode(ctx, newer); !errors.Is(err, codec.ErrDecode) {
		// long does not narrow to int: Avro refuses v1 as a reader of v2.
		t.Fatalf("v1 reader, v2 data (long into int): %v, want ErrDecode", err)
	}
}

func TestDecodeFailures(t *testing.T) {
	reg, cl := newRegistry(t)
	ctx := context.Background()
	users := must(srcodec.New(cl, "users-value", must(avrocodec.New[UserV1](userV1))))
	good := must(users.Encode(ctx, UserV1{Name: "Al", Age: 30}))
	orders := must(srcodec.New(cl, "orders-value", protocodec.New[*testpb.Order](protocodec.WithSchema(testpb.ShopProto))))
	orderID := must(orders.ID(ctx))

	unknown := slices.Clone(good)
	binary.BigEndian.PutUint32(unknown[1:5], 999)
	wrongType := slices.Clone(good)
	binary.BigEndian.PutUint32(wrongType[1:5], uint32(orderID))
	cases := map[string]struct {
		payload []byte
		is      error
	}{
		"empty":           {nil, srcodec.ErrHeader},
		"short header":    {[]byte{0, 0, 0}, srcodec.ErrHeader},
		"magic byte 1":    {append([]byte{1}, good[1:]...), srcodec.ErrHeader},
		"plain JSON":      {[]byte(`{"name":"Al"}`), srcodec.ErrHeader},
		"unknown ID":      {unknown, srcodec.ErrUnknownSchema},
		"protobuf schema": {wrongType, codec.ErrDecode},
		"truncated body":  {good[:len(good)-1], codec.ErrDecode},
	}
	for name, tc := range cases {
		_, err := users.Decode(ctx, tc.payload)
		if !errors.Is(err, codec.ErrDecode) || !errors.Is(err, tc.is) || errors.Is(err, codec.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrDecode and %v", name, err, tc.is)
		}
	}
	_ = reg
	// Protobuf: indexes that do not parse.
	if _, err := orders.Decode(ctx, []byte{0, 0, 0, 0, byte(orderID), 0x80}); !errors.Is(err, srcodec.ErrHeader) {
		t.Errorf("bad message indexes: %v, want ErrHeader", err)
	}
}

// TestRegistryDown: a registry answering 503, or not listening at all, is
// ErrUnavailable (retried), never a decode failure; once it answers, the
// same payload decodes.
func TestRegistryDown(t *testing.T) {
	reg, cl := newRegistry(t)
	ctx := context.Background()
	w := must(srcodec.New(cl, "users-value", must(avrocodec.New[UserV1](userV1))))
	reg.down.Store(true)
	if _, err := w.Encode(ctx, UserV1{Name: "Al"}); !errors.Is(err, codec.ErrUnavailable) {
		t.Fatalf("register while down: %v, want ErrUnavailable", err)
	}
	reg.down.Store(false)
	b := must(w.Encode(ctx, UserV1{Name: "Al", Age: 1}))

	r := must(srcodec.New(cl, "users-value", must(avrocodec.New[UserV1](userV1))))
	reg.down.Store(true)
	if _, err := r.Decode(ctx, b); !errors.Is(err, codec.ErrUnavailable) || errors.Is(err, codec.ErrDecode) {
		t.Fatalf("decode while down: %v, want ErrUnavailable only", err)
	}
	reg.down.Store(false)
	if u, err := r.Decode(ctx, b); err != nil || u.Name != "Al" {
		t.Fatalf("decode after the registry came back: %+v, %v", u, err)
	}

	// Nothing listening.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	gone := must(srcodec.New(client(t, "http://"+addr), "users-value", must(avrocodec.New[UserV1](userV1))))
	if _, err := gone.Decode(ctx, b); !errors.Is(err, codec.ErrUnavailable) {
		t.Fatalf("decode with no registry listening: %v, want ErrUnavailable", err)
	}
}

// TestFixtures: payloads built by hand from the documented wire format
// (what a Java or librdkafka serializer writes) decode.
func TestFixtures(t *testing.T) {
	reg, cl := newRegistry(t)
	ctx := context.Background()
	reg.SeedSchema("users-value", 1, 42, sr.Schema{Schema: userV1, Type: sr.TypeAvro})
	reg.SeedSchema("shop-value", 1, 300, sr.Schema{Schema: testpb.ShopProto, Type: sr.TypeProtobuf})

	// Avro, schema 42: 00 | 00 00 00 2a | "Al" (len 2 -> zig-zag 04) | 30 -> zig-zag 3c.
	users := must(srcodec.New(cl, "users-value", must(avrocodec.New[UserV1](userV1))))
	if u, err := users.Decode(ctx, []byte{0x00, 0x00, 0x00, 0x00, 0x2a, 0x04, 'A', 'l', 0x3c}); err != nil || u != (UserV1{Name: "Al", Age: 30}) {
		t.Errorf("Avro fixture: %+v, %v", u, err)
	}
	// Protobuf, schema 300 (00 00 01 2c), first message: index byte 00,
	// then id="o-9" (0a 03 ...), total=7 (10 07).
	orders := must(srcodec.New(cl, "shop-value", protocodec.New[*testpb.Order]()))
	o, err := orders.Decode(ctx, []byte{0x00, 0x00, 0x00, 0x01, 0x2c, 0x00, 0x0a, 0x03, 'o', '-', '9', 0x10, 0x07})
	if err != nil || o.GetId() != "o-9" || o.GetTotal() != 7 {
		t.Errorf("protobuf fixture: %v, %v", o, err)
	}
	// The same message with its index written in full: count 1 (02), 0 (00).
	o, err = orders.Decode(ctx, []byte{0x00, 0x00, 0x00, 0x01, 0x2c, 0x02, 0x00, 0x0a, 0x03, 'o', '-', '9'})
	if err != nil || o.GetId() != "o-9" {
		t.Errorf("protobuf fixture, full index: %v, %v", o, err)
	}
	// Cart.Line: indexes [1, 0] -> 04 02 00; sku="x" (0a 01 78), qty=3 (10 03).
	lines := must(srcodec.New(cl, "shop-value", protocodec.New[*testpb.Cart_Line]()))
	l, err := lines.Decode(ctx, []byte{0x00, 0x00, 0x00, 0x01, 0x2c, 0x04, 0x02, 0x00, 0x0a, 0x01, 'x', 0x10, 0x03})
	if err != nil || l.GetSku() != "x" || l.GetQty() != 3 {
		t.Errorf("protobuf nested fixture: %v, %v", l, err)
	}
	// A codec that knows the file (WithSchema) refuses another message of
	// it: Cart.Line's bytes are no Order.
	strict := must(srcodec.New(cl, "shop-value", protocodec.New[*testpb.Order](protocodec.WithSchema(testpb.ShopProto))))
	if _, err := strict.Decode(ctx, []byte{0x00, 0x00, 0x00, 0x01, 0x2c, 0x04, 0x02, 0x00, 0x0a, 0x01, 'x'}); !errors.Is(err, codec.ErrDecode) {
		t.Errorf("Cart.Line payload read as Order: %v, want ErrDecode", err)
	}
	if o, err := strict.Decode(ctx, []byte{0x00, 0x00, 0x00, 0x01, 0x2c, 0x00, 0x0a, 0x01, 'x'}); err != nil || o.GetId() != "x" {
		t.Errorf("Order payload: %v, %v", o, err)
	}
}

func TestConfigErrors(t *testing.T) {
	_, cl := newRegistry(t)
	f := must(avrocodec.New[UserV1](userV1))
	for name, fn := range map[string]func() error{
		"nil client":    func() error { _, err := srcodec.New[UserV1](nil, "s", f); return err },
		"empty subject": func() error { _, err := srcodec.New[UserV1](cl, "", f); return err },
		"nil format":    func() error { _, err := srcodec.New[UserV1](cl, "s", nil); return err },
	} {
		if err := fn(); !errors.Is(err, srcodec.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// TestOneFetchPerSchema: decodes of a new writer schema that start
// together (lanes after a start or a rebalance) ask the registry once.
func TestOneFetchPerSchema(t *testing.T) {
	reg, cl := newRegistry(t)
	ctx := context.Background()
	w := must(srcodec.New(cl, "users-value", must(avrocodec.New[UserV1](userV1))))
	b := must(w.Encode(ctx, UserV1{Name: "Al", Age: 30}))
	r := must(srcodec.New(cl, "users-value", must(avrocodec.New[UserV2](userV2))))
	var fetches atomic.Int64
	release := make(chan struct{})
	reg.Intercept(func(_ http.ResponseWriter, req *http.Request) bool {
		if req.Method == http.MethodGet {
			fetches.Add(1)
			<-release // hold the fetch until every decode has started
		}
		return false
	})
	const n = 50
	errs := make(chan error, n)
	var started sync.WaitGroup
	started.Add(n)
	for range n {
		go func() {
			started.Done()
			u, err := r.Decode(ctx, b)
			if err == nil && u.Name != "Al" {
				err = fmt.Errorf("decoded %+v", u)
			}
			errs <- err
		}()
	}
	started.Wait()
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := fetches.Load(); got != 1 {
		t.Fatalf("%d decodes fetched the schema %d times, want once", n, got)
	}
}
