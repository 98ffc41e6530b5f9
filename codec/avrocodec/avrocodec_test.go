package avrocodec_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/lanesdev/lanes/codec"
	"github.com/lanesdev/lanes/codec/avrocodec"
	"go.uber.org/goleak"
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

func TestRoundTrip(t *testing.T) {
	c, err := avrocodec.New[UserV1](userV1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, err := c.Encode(ctx, UserV1{Name: "Al", Age: 30})
	if err != nil {
		t.Fatal(err)
	}
	// string: zigzag length 2 (0x04), "Al"; int 30: zigzag 60 (0x3c).
	if want := []byte{0x04, 'A', 'l', 0x3c}; !slices.Equal(b, want) {
		t.Fatalf("encoded % x, want % x", b, want)
	}
	u, err := c.Decode(ctx, b)
	if err != nil || u != (UserV1{Name: "Al", Age: 30}) {
		t.Fatalf("decoded %+v, %v", u, err)
	}
	for _, bad := range [][]byte{{}, {0x04, 'A'}, {0x04, 'A', 'l', 0x3c, 0x00}, {0x7f}} {
		if _, err := c.Decode(ctx, bad); !errors.Is(err, codec.ErrDecode) {
			t.Errorf("Decode(% x) = %v, want ErrDecode", bad, err)
		}
	}
	if _, err := avrocodec.New[UserV1](`{"type":"record"}`); !errors.Is(err, avrocodec.ErrSchema) {
		t.Errorf("New(bad schema) = %v, want ErrSchema", err)
	}
}

// TestEvolution: a v2 reader (age promoted to long, email added with a
// default) reads what a v1 writer wrote; a reader that needs a field the
// writer lacks, with no default, is refused.
func TestEvolution(t *testing.T) {
	w, _ := avrocodec.New[UserV1](userV1)
	r, err := avrocodec.New[UserV2](userV2)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := w.Encode(context.Background(), UserV1{Name: "Al", Age: 30})
	dec, err := r.Reader(w.WriterSchema())
	if err != nil {
		t.Fatal(err)
	}
	u, err := dec(b)
	if err != nil || u != (UserV2{Name: "Al", Age: 30, Email: "unknown"}) {
		t.Fatalf("v2 read of v1 data: %+v, %v", u, err)
	}
	// Backwards: v1 reads v2 data, skipping email.
	b2, _ := r.Encode(context.Background(), UserV2{Name: "Bo", Age: 41, Email: "bo@example.com"})
	back, err := avrocodec.New[UserV1](`{"type":"record","name":"User","namespace":"lanes.test","fields":[{"name":"name","type":"string"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	dec1, err := back.Reader(userV2)
	if err != nil {
		t.Fatalf("name-only reader of v2: %v", err)
	}
	if u, err := dec1(b2); err != nil || u.Name != "Bo" {
		t.Fatalf("name-only reader of v2 data: %+v, %v", u, err)
	}
	noDefault := `{"type":"record","name":"User","namespace":"lanes.test","fields":[
		{"name":"name","type":"string"},{"name":"age","type":"int"},{"name":"tier","type":"int"}]}`
	strict, _ := avrocodec.New[map[string]any](noDefault)
	if _, err := strict.Reader(userV1); err == nil {
		t.Fatal("a reader field without default resolved against a writer without it")
	}
}
