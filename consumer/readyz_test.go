package consumer

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Each readiness reason is shown set and then cleared through readyz, as a
// Kubernetes probe sees it. The stalled partition and the reqErr commit
// failure are in health_test.go.

// awaitReadyz polls readyz until ok accepts its answer; it returns the body.
func awaitReadyz(t *testing.T, srv *httptest.Server, what string, ok func(code int, body string) bool) string {
	t.Helper()
	var body string
	eventually(t, what, func() bool {
		var code int
		code, body = get(t, srv, "/readyz")
		return ok(code, body)
	})
	return body
}

// ready accepts a 200 "ok".
func ready(code int, body string) bool { return code == http.StatusOK && body == "ok\n" }

// topicNames maps the cluster's topic IDs to names (requests of recent
// versions name topics by ID).
func (e *env) topicNames() map[[16]byte]string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tds, err := kadm.NewClient(e.client()).ListTopics(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[[16]byte]string{}
	for _, td := range tds {
		out[td.ID] = td.Topic
	}
	return out
}

// failProduce answers every produce request to topic with code while the
// returned switch is on.
func (e *env) failProduce(topic string, code int16) *atomic.Bool {
	var on atomic.Bool
	e.answerProduce(topic, func([]byte) int16 {
		if on.Load() {
			return code
		}
		return 0
	})
	return &on
}

// answerProduce answers a produce request to topic alone (one that writes
// other topics too goes through whole) when code gives an error code
// other than 0 for one of its batches: each batch with its code. It counts
// the requests it answered.
func (e *env) answerProduce(topic string, code func(batch []byte) int16) *atomic.Int64 {
	names := e.topicNames()
	answered := new(atomic.Int64)
	e.c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		failed := false
		for _, rt := range req.Topics {
			if rt.Topic != topic && names[rt.TopicID] != topic {
				return nil, nil, false
			}
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code(rp.Records)
				failed = failed || sp.ErrorCode != 0
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		if !failed {
			return nil, nil, false
		}
		answered.Add(1)
		return resp, nil, true
	})
	return answered
}

// failCommits answers the commits of member() that cover only topic with
// code for each partition, while the returned switch is on.
func (e *env) failCommits(topic string, member func() string, code int16) *atomic.Bool {
	names := e.topicNames()
	var on atomic.Bool
	e.c.ControlKey(int16(kmsg.OffsetCommit), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		req := kreq.(*kmsg.OffsetCommitRequest)
		if !on.Load() || req.MemberID != member() {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range req.Topics {
			if rt.Topic != topic && names[rt.TopicID] != topic {
				return nil, nil, false
			}
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return &on
}

// TestReadyzDeadLetterFailing: while the DLQ refuses a poison record's copy
// the consumer is not ready, naming the partition, the offset and the
// broker's error; once the copy is written it is ready again.
func TestReadyzDeadLetterFailing(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	e.produceValues("chats", "ok|0", "a|0") // offsets 0, 1
	refused := e.failProduce("dlq", kerr.TopicAuthorizationFailed.Code)
	refused.Store(true)
	c, err := New(e.config("g-readyz-dlq", "chats"), HandlerFunc(func(_ context.Context, m *Message) error {
		if m.SessionID == "a" {
			return Permanent(errors.New("poison"))
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	srv := httptest.NewServer(c.HealthHandler())
	defer srv.Close()
	awaitReadyz(t, srv, "dead-letter writes failing", notReadyWith(
		"chats/0 dead-letter writes failing", "at offset 1", "TOPIC_AUTHORIZATION_FAILED"))
	refused.Store(false)
	awaitReadyz(t, srv, "ready once the copy is written", ready)
	if st := c.Stats(); st.DeadLettered != 1 || st.Partitions[0].DeadLetterError != "" {
		t.Fatalf("dead-lettered %d, partition %+v", st.DeadLettered, st.Partitions[0])
	}
}

// TestReadyzDeadLetterSuperseded: with SkipStalled the stall skipper's DLQ
// write fails, and then the stuck handler returns success: the record is
// done, so the failed write holds nothing and the consumer is ready again,
// although no dead-letter write ever succeeded.
func TestReadyzDeadLetterSuperseded(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	e.produceValues("chats", "a|0", "a|1") // offsets 0, 1
	refused := e.failProduce("dlq", kerr.TopicAuthorizationFailed.Code)
	refused.Store(true)
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()
	handled := make(chan string, 2)
	c, err := New(func() Config {
		cfg := e.config("g-readyz-dlq-superseded", "chats")
		cfg.StallTimeout, cfg.SkipStalled = 100*time.Millisecond, true
		return cfg
	}(), HandlerFunc(func(_ context.Context, m *Message) error {
		if string(m.Record.Value) == "a|0" {
			<-release // ignores its context, on purpose
		}
		handled <- string(m.Record.Value)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	srv := httptest.NewServer(c.HealthHandler())
	defer srv.Close()
	awaitReadyz(t, srv, "the skipper's write failing", notReadyWith(
		"chats/0 stalled", "chats/0 dead-letter writes failing", "at offset 0"))
	unblock() // the handler returns success: a|0 is done by its lane
	for _, want := range []string{"a|0", "a|1"} {
		select {
		case got := <-handled:
			if got != want {
				t.Fatalf("handled %s, want %s", got, want)
			}
		case <-time.After(testTimeout):
			t.Fatalf("%s never handled", want)
		}
	}
	awaitReadyz(t, srv, "ready once the record is done", ready)
	if st := c.Stats(); st.DeadLettered != 0 || st.Partitions[0].DeadLetterBlockedAt != -1 || st.Partitions[0].DeadLetterError != "" {
		t.Fatalf("dead-lettered %d, partition %+v", st.DeadLettered, st.Partitions[0])
	}
}

// TestReadyzCommitFailureOfReleasedPartition: commits of one partition
// fail; the partition is then revoked (its final commit fails too) and
// released, and the partition left is quiet, so no commit request is made
// again. The failure was about a partition no longer owned: the consumer
// is ready.
func TestReadyzCommitFailureOfReleasedPartition(t *testing.T) {
	e := newEnv(t, 1, "chats", "other", "dlq")
	var memberA atomic.Value
	memberA.Store("")
	refused := e.failCommits("other", func() string { return memberA.Load().(string) }, kerr.TopicAuthorizationFailed.Code)
	cfg := e.config("g-readyz-commit-released", "chats", "other")
	a, err := New(cfg, HandlerFunc(func(context.Context, *Message) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	start(t, a)
	e.produceValues("chats", "a|0")
	e.produceValues("other", "b|0")
	eventually(t, "both partitions committed", func() bool {
		ps := a.Stats().Partitions
		return len(ps) == 2 && ps[0].Committed == 1 && ps[1].Committed == 1
	})
	srv := httptest.NewServer(a.HealthHandler())
	defer srv.Close()
	awaitReadyz(t, srv, "ready", ready)

	id := memberID(t, e, cfg.Group)
	memberA.Store(id)
	refused.Store(true)
	e.produceValues("other", "b|1") // a commit of other/0 is due, and fails
	body := awaitReadyz(t, srv, "commits of other/0 failing", notReadyWith(
		"commits failing for other/0 since", "TOPIC_AUTHORIZATION_FAILED"))
	if strings.Contains(body, "chats/0") {
		t.Fatalf("readyz names chats/0, whose commits succeed:\n%s", body)
	}

	// B subscribes to other only: the group moves other/0 to it.
	bcfg := e.config("g-readyz-commit-released", "other")
	b, err := New(bcfg, HandlerFunc(func(context.Context, *Message) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	start(t, b)
	eventually(t, "other/0 moved to B", func() bool {
		ps := a.Stats().Partitions
		return len(ps) == 1 && ps[0].Topic == "chats"
	})
	awaitReadyz(t, srv, "ready once the failing partition is released", ready)
}

// TestReadyzBreakerOpen: while the handler's dependency is down the
// breaker opens and the consumer is not ready; when a probe succeeds it
// closes and the consumer is ready again.
func TestReadyzBreakerOpen(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	e.produceValues("chats", "a|0")
	var down atomic.Bool
	down.Store(true)
	cfg := e.config("g-readyz-breaker", "chats")
	cfg.Retry.Forever = true
	cfg.Breaker = BreakerPolicy{Enabled: true, Window: time.Minute, MinCalls: 3, FailureRatio: 0.5, ProbeInterval: 20 * time.Millisecond}
	c, err := New(cfg, HandlerFunc(func(context.Context, *Message) error {
		if down.Load() {
			return errDatabaseDown
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	srv := httptest.NewServer(c.HealthHandler())
	defer srv.Close()
	awaitReadyz(t, srv, "breaker open", notReadyWith("breaker open since", "attempts failed"))
	down.Store(false)
	awaitReadyz(t, srv, "ready once the breaker closed", ready)
	if st := c.Stats(); st.Processed != 1 || st.DeadLettered != 0 || st.Breaker.Open {
		t.Fatalf("processed %d, dead-lettered %d, breaker %+v", st.Processed, st.DeadLettered, st.Breaker)
	}
}
