package srcodec

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/lanesdev/lanes/codec"
	"github.com/twmb/franz-go/pkg/sr"
)

// Format is what a Codec needs of a payload format: avrocodec.Codec and
// protocodec.Codec have these methods.
type Format[T any] interface {
	// SchemaType is the registry's name of the schema language: "AVRO",
	// "PROTOBUF" or "JSON".
	SchemaType() string
	// WriterSchema is the schema text registered for T on the first encode.
	WriterSchema() string
	// MessageIndex is T's message indexes in its protobuf file; nil for
	// formats without them.
	MessageIndex() []int
	// AppendEncode appends v's encoding (no header) to b.
	AppendEncode(b []byte, v T) ([]byte, error)
	// Reader returns the decoder of payloads written with writerSchema
	// (text from the registry).
	Reader(writerSchema string) (func([]byte) (T, error), error)
}

// Codec encodes and decodes a T in the Confluent wire format. It is safe
// for concurrent use.
type Codec[T any] struct {
	cl      *sr.Client
	subject string
	f       Format[T]
	typ     sr.SchemaType
	index   []int
	header  sr.ConfluentHeader

	regMu sync.Mutex   // held while registering
	id    atomic.Int64 // the writer schema's ID once registered; 0 before

	mu       sync.RWMutex
	readers  map[int]func([]byte) (T, error) // by writer schema ID
	own      map[int]bool                    // writer schema IDs whose text is the format's own
	fetching map[int]*fetch[T]               // schema fetches under way, by ID
}

// isOwn reports whether writer schema id (fetched) is the format's own
// schema text: then a protobuf payload's message indexes must be T's.
func (c *Codec[T]) isOwn(id int) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.own[id]
}

// fetch is one schema fetch that every decode of its ID waits for: lanes
// starting together on a new writer schema ask the registry once.
type fetch[T any] struct {
	done chan struct{} // closed when read or err is set
	read func([]byte) (T, error)
	err  error
}

// TopicSubject is the subject Confluent's default naming strategy
// (TopicNameStrategy) gives the values of topic: topic + "-value".
func TopicSubject(topic string) string { return topic + "-value" }

// New returns the Codec of f's payloads, registered under subject (see
// TopicSubject) in the registry cl talks to.
func New[T any](cl *sr.Client, subject string, f Format[T]) (*Codec[T], error) {
	if cl == nil {
		return nil, fmt.Errorf("%w: client: must not be nil", ErrConfig)
	}
	if subject == "" {
		return nil, fmt.Errorf("%w: subject: must not be empty (TopicSubject(topic) is the usual one)", ErrConfig)
	}
	if f == nil {
		return nil, fmt.Errorf("%w: format: must not be nil", ErrConfig)
	}
	var typ sr.SchemaType
	if err := typ.UnmarshalText([]byte(f.SchemaType())); err != nil {
		return nil, fmt.Errorf("%w: format: schema type %q: %w", ErrConfig, f.SchemaType(), err)
	}
	index := f.MessageIndex()
	if typ == sr.TypeProtobuf && len(index) == 0 {
		return nil, fmt.Errorf("%w: format: a protobuf format needs its message index", ErrConfig)
	}
	return &Codec[T]{cl: cl, subject: subject, f: f, typ: typ, index: index, readers: map[int]func([]byte) (T, error){}, fetching: map[int]*fetch[T]{}, own: map[int]bool{}}, nil
}

// Encode registers the format's schema on first use (the registry returns
// the existing ID of a schema it has), then frames v's encoding with the
// header. A registry that cannot be reached is an error wrapping
// codec.ErrUnavailable (try again); one that refuses the schema
// (incompatible, invalid) wraps codec.ErrEncode.
func (c *Codec[T]) Encode(ctx context.Context, v T) ([]byte, error) {
	id, err := c.writerID(ctx)
	if err != nil {
		return nil, err
	}
	b, _ := c.header.AppendEncode(make([]byte, 0, 64), id, c.index)
	return c.f.AppendEncode(b, v)
}

// ID is the schema ID Encode writes, registering the schema if it was not
// yet.
func (c *Codec[T]) ID(ctx context.Context) (int, error) { return c.writerID(ctx) }

func (c *Codec[T]) writerID(ctx context.Context) (int, error) {
	if id := c.id.Load(); id != 0 {
		return int(id), nil
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if id := c.id.Load(); id != 0 {
		return int(id), nil
	}
	text := c.f.WriterSchema()
	if text == "" {
		return 0, fmt.Errorf("%w: srcodec: subject %s: the format has no schema to register (protocodec: WithSchema)", codec.ErrEncode, c.subject)
	}
	id, err := c.cl.RegisterSchema(ctx, c.subject, sr.Schema{Schema: text, Type: c.typ}, -1, -1)
	if err != nil {
		kind := codec.ErrUnavailable
		var re *sr.ResponseError
		if errors.As(err, &re) && (re.StatusCode == http.StatusConflict || re.StatusCode == http.StatusUnprocessableEntity) {
			kind = codec.ErrEncode
		}
		return 0, fmt.Errorf("%w: srcodec: register schema under subject %s: %w", kind, c.subject, err)
	}
	c.id.Store(int64(id))
	return id, nil
}

// Decode reads the header, finds the writer's schema by its ID (fetched
// from the registry once per ID) and decodes the rest with it.
func (c *Codec[T]) Decode(ctx context.Context, payload []byte) (T, error) {
	var zero T
	id, rest, err := c.header.DecodeID(payload)
	if err != nil {
		return zero, fmt.Errorf("%w: %w: %w", codec.ErrDecode, ErrHeader, err)
	}
	var index []int
	if c.typ == sr.TypeProtobuf {
		if index, rest, err = c.header.DecodeIndex(rest, 0); err != nil {
			return zero, fmt.Errorf("%w: %w: schema ID %d: message indexes: %w", codec.ErrDecode, ErrHeader, id, err)
		}
	}
	read, err := c.reader(ctx, id)
	if err != nil {
		return zero, err
	}
	if index != nil && !slices.Equal(index, c.index) && c.isOwn(id) {
		return zero, fmt.Errorf("%w: srcodec: schema ID %d: the payload is message %v of the .proto file, this codec reads message %v",
			codec.ErrDecode, id, index, c.index)
	}
	v, err := read(rest)
	if err != nil {
		return zero, fmt.Errorf("schema ID %d: %w", id, err)
	}
	return v, nil
}

// reader returns the decoder for writer schema id, fetching the schema the
// first time; concurrent decodes of one ID share one fetch. A failed fetch
// is not kept: the next decode asks again.
func (c *Codec[T]) reader(ctx context.Context, id int) (func([]byte) (T, error), error) {
	c.mu.RLock()
	read, ok := c.readers[id]
	c.mu.RUnlock()
	if ok {
		return read, nil
	}
	c.mu.Lock()
	if read, ok := c.readers[id]; ok {
		c.mu.Unlock()
		return read, nil
	}
	f, waiting := c.fetching[id]
	if !waiting {
		f = &fetch[T]{done: make(chan struct{})}
		c.fetching[id] = f
	}
	c.mu.Unlock()
	if waiting {
		select {
		case <-f.done:
			return f.read, f.err
		case <-ctx.Done():
			return nil, fmt.Errorf("srcodec: wait for schema ID %d: %w", id, ctx.Err())
		}
	}
	var own bool
	f.read, own, f.err = c.fetch(ctx, id)
	c.mu.Lock()
	if f.err == nil {
		c.readers[id] = f.read
		c.own[id] = own
	}
	delete(c.fetching, id)
	c.mu.Unlock()
	close(f.done)
	return f.read, f.err
}

// fetch asks the registry for writer schema id and builds its decoder;
// own reports whether the schema is the format's own text.
func (c *Codec[T]) fetch(ctx context.Context, id int) (read func([]byte) (T, error), own bool, err error) {
	s, err := c.cl.SchemaByID(ctx, id)
	if err != nil {
		var re *sr.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusNotFound && re.ErrorCode == sr.ErrSchemaNotFound.Code {
			return nil, false, fmt.Errorf("%w: %w: %d: %w", codec.ErrDecode, ErrUnknownSchema, id, err)
		}
		return nil, false, fmt.Errorf("%w: srcodec: fetch schema ID %d: %w", codec.ErrUnavailable, id, err)
	}
	if s.Type != c.typ {
		return nil, false, fmt.Errorf("%w: srcodec: schema ID %d is %s, this codec reads %s", codec.ErrDecode, id, s.Type, c.typ)
	}
	read, err = c.f.Reader(s.Schema)
	if err != nil {
		return nil, false, fmt.Errorf("%w: srcodec: schema ID %d: %w", codec.ErrDecode, id, err)
	}
	return read, s.Schema == c.f.WriterSchema(), nil
}
