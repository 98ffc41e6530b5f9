package hashring

import "github.com/twmb/franz-go/pkg/kgo"

// Partitioner is franz-go's partitioner for scheme: Kafka's murmur2
// (SchemeKafka, kgo.StickyKeyPartitioner) or jump hashing (SchemeJump,
// [JumpPartition]). It also stamps each keyed record with the placement it
// made ([HeaderPlacement]: the scheme and the partition count it hashed
// over), so that a consumer can keep a session's order when the topic's
// partition count changes. The lanes producer and the consumer's
// transactional outputs place records with it.
func Partitioner(scheme Scheme) kgo.Partitioner {
	if scheme == SchemeJump {
		return placing{SchemeJump, kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
			return func(r *kgo.Record, n int) int {
				p, _ := JumpPartition(string(r.Key), n)
				return p
			}
		})}
	}
	return placing{SchemeKafka, kgo.StickyKeyPartitioner(nil)}
}

// placing is Partitioner's: the scheme's own partitioner, stamping.
type placing struct {
	scheme Scheme
	inner  kgo.Partitioner
}

func (pl placing) ForTopic(t string) kgo.TopicPartitioner {
	return &placingTopic{scheme: pl.scheme, inner: pl.inner.ForTopic(t)}
}

// placingTopic places the records of one topic. franz-go calls it under
// the topic's partitioner lock, so its cache of the last header value
// needs no lock of its own.
type placingTopic struct {
	scheme Scheme
	inner  kgo.TopicPartitioner
	n      int    // the count value was made for
	value  []byte // the header value for n
}

func (pt *placingTopic) RequiresConsistency(r *kgo.Record) bool {
	return pt.inner.RequiresConsistency(r)
}

func (pt *placingTopic) Partition(r *kgo.Record, n int) int {
	if pt.n != n {
		pt.n, pt.value = n, []byte(Placement{Scheme: pt.scheme, Count: n}.String())
	}
	if len(r.Key) > 0 { // a keyless record is placed by no key: nothing to keep in order
		stampPlacement(r, pt.value)
	}
	return pt.inner.Partition(r, n)
}

// stampPlacement sets r's placement header to v, replacing one set before
// (a record partitioned again).
func stampPlacement(r *kgo.Record, v []byte) {
	for i := range r.Headers {
		if r.Headers[i].Key == HeaderPlacement {
			r.Headers[i].Value = v
			return
		}
	}
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderPlacement, Value: v})
}
