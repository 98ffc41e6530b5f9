package consumer

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lanesdev/lanes/consumer/internal/longtest"
)

// The group timings of the membership tests: a short session timeout, so a
// member out of its group is noticed in a test's time, and heartbeats well
// inside it.
const (
	testSessionTimeout    = 1500 * time.Millisecond
	testHeartbeatInterval = 100 * time.Millisecond
	// boundSlack is what the tests allow past the documented bound for
	// scheduling on a loaded machine.
	boundSlack = 3 * time.Second
)

// groupProtocol is a group protocol a test runs under.
type groupProtocol struct {
	name string
	opts []kgo.Opt
	// coordinator lists the request keys a dead coordinator no longer
	// answers under this protocol.
	coordinator []kmsg.Key
}

// groupProtocols are the two group protocols a test runs under: classic
// (client-side cooperative-sticky) and KIP-848 (kgo.ServerSideBalancer).
var groupProtocols = []groupProtocol{
	{"classic", nil, []kmsg.Key{kmsg.Heartbeat, kmsg.JoinGroup, kmsg.SyncGroup}},
	{"kip848", []kgo.Opt{kgo.ServerSideBalancer()}, []kmsg.Key{kmsg.ConsumerGroupHeartbeat}},
}

// protocolsFor is the group protocols t runs under: both, or under -short
// (make test) only the one named quick; make test-long runs both.
func protocolsFor(t *testing.T, quick string) []groupProtocol {
	t.Helper()
	for _, p := range groupProtocols {
		if p.name == quick {
			return longtest.Size(t, groupProtocols, []groupProtocol{p})
		}
	}
	t.Fatalf("no group protocol %q", quick)
	return nil
}

// newGroupEnv starts a one-broker cluster whose groups (both protocols)
// time out members after testSessionTimeout.
func newGroupEnv(t *testing.T, partitions int32, opts ...kfake.Opt) *env {
	t.Helper()
	ms := strconv.Itoa(int(testSessionTimeout.Milliseconds()))
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, "chats", "dlq"),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
		kfake.BrokerConfigs(map[string]string{
			"group.consumer.session.timeout.ms":    ms,
			"group.consumer.heartbeat.interval.ms": strconv.Itoa(int(testHeartbeatInterval.Milliseconds())),
		})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return wrapEnv(t, c)
}

// groupConfig is e.config with the test group timings and the protocol's
// options.
func (e *env) groupConfig(group string, protocol []kgo.Opt) Config {
	cfg := e.config(group, "chats")
	cfg.ClientOptions = append([]kgo.Opt{kgo.SessionTimeout(testSessionTimeout), kgo.HeartbeatInterval(testHeartbeatInterval),
		// A request the coordinator never answers is given up on soon.
		kgo.RequestTimeoutOverhead(2 * time.Second)}, protocol...)
	return cfg
}

// TestReadyAfterCoordinatorDies: a member that consumed stops being ready
// within the session timeout once the group coordinator stops answering
// its group requests, naming the group, and is ready again once the
// coordinator answers and it has rejoined. Under both group protocols, and
// for both ways a coordinator dies: closing the connection on every group
// request (franz-go ends the session at once), and never answering them
// (a KIP-848 member retries its heartbeat without ending the session: the
// silence itself must make it not ready).
func TestReadyAfterCoordinatorDies(t *testing.T) {
	modes := []struct {
		name   string
		answer func() (kmsg.Response, error, bool)
	}{
		{"closes", func() (kmsg.Response, error, bool) { return nil, errors.New("injected: coordinator gone"), true }},
		{"silent", func() (kmsg.Response, error, bool) { return nil, nil, true }},
	}
	for _, proto := range protocolsFor(t, "classic") {
		for _, mode := range modes {
			t.Run(proto.name+"/"+mode.name, func(t *testing.T) {
				e := newGroupEnv(t, 1)
				var dead atomic.Bool
				for _, k := range proto.coordinator {
					e.c.ControlKey(int16(k), func(kmsg.Request) (kmsg.Response, error, bool) {
						e.c.KeepControl()
						if dead.Load() {
							return mode.answer()
						}
						return nil, nil, false
					})
				}
				logs := newLogCapture()
				group := "g-coord-" + proto.name + "-" + mode.name
				cfg := e.groupConfig(group, proto.opts)
				cfg.Logger = &logs.log
				rec := newRecorder(1, nil)
				c, err := New(cfg, rec)
				if err != nil {
					t.Fatal(err)
				}
				p := newProbe(t, c)
				start(t, c)
				e.produceValues("chats", "a|0")
				rec.wait(t)
				p.awaitReadyz("ready", testTimeout, ready)

				dead.Store(true)
				began := time.Now()
				body := p.awaitReadyz("not ready, naming the group", testSessionTimeout+boundSlack, notReadyWith(`group "`+group+`"`))
				t.Logf("not ready after %v: %s", time.Since(began), body)

				dead.Store(false)
				began = time.Now()
				p.awaitReadyz("ready again", testTimeout, ready)
				t.Logf("ready again after %v", time.Since(began))
				if proto.name == "classic" && mode.name == "closes" {
					// The classic member gave its partition up when its
					// session failed: the log names it as topic/partition.
					lost := logs.lines("partitions lost")
					if len(lost) == 0 || !containsStr(lost[0]["partitions"], "chats/0") {
						t.Fatalf("partitions lost lines %v: want one naming chats/0\n%s", lost, logs)
					}
				}
			})
		}
	}
}

// TestReadyAfterBrokerCloses: the only broker goes away; readyz says the
// brokers cannot be reached within the session timeout; a broker started
// again on the same address, with its state, makes the member ready again. Under both group protocols.
func TestReadyAfterBrokerCloses(t *testing.T) {
	for _, proto := range protocolsFor(t, "classic") {
		t.Run(proto.name, func(t *testing.T) {
			dir := t.TempDir()
			e := newGroupEnv(t, 1, kfake.DataDir(dir))
			rec := newRecorder(1, nil)
			c, err := New(e.groupConfig("g-close-"+proto.name, proto.opts), rec)
			if err != nil {
				t.Fatal(err)
			}
			p := newProbe(t, c)
			start(t, c)
			e.produceValues("chats", "a|0")
			rec.wait(t)
			p.awaitReadyz("ready", testTimeout, ready)

			addr := e.addrs[0]
			e.close() // the env's close: no control function sleeps as the cluster closes
			p.awaitReadyz("not ready: brokers unreachable", testSessionTimeout+boundSlack, notReadyWith("cannot reach brokers ["+addr+"]"))

			// The broker restarts on the same address with its state.
			newGroupEnv(t, 1, kfake.Ports(portOf(t, addr)), kfake.DataDir(dir))
			p.awaitReadyz("ready again", testTimeout, ready)
		})
	}
}

// TestReadyIdleMember: with more members than partitions, the member given
// nothing is ready as well: it is in its group, idle by the group's choice.
// It stays ready while its heartbeats are answered, past several session
// timeouts.
func TestReadyIdleMember(t *testing.T) {
	longtest.Only(t, "ready past three session timeouts, under both protocols")
	for _, proto := range groupProtocols {
		t.Run(proto.name, func(t *testing.T) {
			e := newGroupEnv(t, 1)
			var probes []*probe
			var heartbeats []*atomic.Int64
			for i := 0; i < 2; i++ {
				cfg := e.groupConfig("g-idle-"+proto.name, proto.opts)
				hb := new(atomic.Int64)
				cfg.ClientOptions = append(cfg.ClientOptions, kgo.WithHooks(heartbeatCounter{hb}))
				c, err := New(cfg, nopHandler())
				if err != nil {
					t.Fatal(err)
				}
				probes = append(probes, newProbe(t, c))
				heartbeats = append(heartbeats, hb)
				start(t, c)
			}
			for _, p := range probes {
				p.awaitReadyz("ready", testTimeout, ready)
			}
			// Heartbeats answered across three session timeouts.
			for _, hb := range heartbeats {
				base := hb.Load()
				want := base + 3*int64(testSessionTimeout/testHeartbeatInterval)
				eventually(t, "heartbeats", func() bool { return hb.Load() >= want })
			}
			for i, p := range probes {
				if code, body := p.readyz(); code != http.StatusOK {
					t.Fatalf("member %d: readyz %d %q", i, code, body)
				}
			}
		})
	}
}

// heartbeatCounter counts answered group heartbeats (either protocol).
type heartbeatCounter struct{ n *atomic.Int64 }

func (h heartbeatCounter) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if (key == int16(kmsg.Heartbeat) || key == int16(kmsg.ConsumerGroupHeartbeat)) && e2e.Err() == nil {
		h.n.Add(1)
	}
}

func containsStr(v any, s string) bool {
	xs, _ := v.([]any)
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// TestGroupErrorLogged: a group error (the coordinator lookup denied) is
// logged as a consumer group error naming the group, not as a fetch error
// of topic "", and readyz carries it on the not-assigned reason; a member
// that never had partitions logs no "partitions lost" line for the empty
// loss franz-go reports on each failed attempt. Once the lookup is allowed
// the member joins and is ready.
func TestGroupErrorLogged(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	var denied atomic.Bool
	denied.Store(true)
	e.c.ControlKey(int16(kmsg.FindCoordinator), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		if !denied.Load() {
			return nil, nil, false
		}
		r := req.(*kmsg.FindCoordinatorRequest)
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.SetVersion(r.GetVersion())
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		for _, k := range append(r.CoordinatorKeys, r.CoordinatorKey) {
			co := kmsg.NewFindCoordinatorResponseCoordinator()
			co.Key, co.ErrorCode = k, kerr.GroupAuthorizationFailed.Code
			resp.Coordinators = append(resp.Coordinators, co)
		}
		return resp, nil, true
	})
	logs := newLogCapture()
	cfg := e.config("g-denied", "chats")
	cfg.Logger = &logs.log
	c, err := New(cfg, nopHandler())
	if err != nil {
		t.Fatal(err)
	}
	p := newProbe(t, c)
	start(t, c)
	p.awaitReadyz("the group error", testTimeout, notReadyWith("not assigned yet", "GROUP_AUTHORIZATION_FAILED"))
	eventually(t, "a group error logged", func() bool {
		for _, l := range logs.lines("consumer group error") {
			if l["group"] == "g-denied" && strings.Contains(l["error"].(string), "GROUP_AUTHORIZATION_FAILED") {
				return true
			}
		}
		return false
	})
	if bad := logs.where(func(m map[string]any) bool {
		return m["message"] == "fetch error" && m["topic"] == ""
	}); len(bad) > 0 {
		t.Fatalf("client-level errors logged as fetch errors: %v", bad)
	}
	if lost := logs.lines("partitions lost"); len(lost) > 0 {
		t.Fatalf("partitions lost logged with nothing lost: %v", lost)
	}
	denied.Store(false)
	p.awaitReadyz("ready", testTimeout, ready)
}

// TestNotReadyWhileKIP848SessionRestarts: a KIP-848 member whose heartbeats
// go unanswered restarts its session again and again without a loss (each
// restart is an assignment of nothing new); it stays not ready through
// every restart, as long as no heartbeat is answered.
func TestNotReadyWhileKIP848SessionRestarts(t *testing.T) {
	longtest.Only(t, "not ready through two session restarts")
	e := newGroupEnv(t, 1)
	var dead atomic.Bool
	e.c.ControlKey(int16(kmsg.ConsumerGroupHeartbeat), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		if dead.Load() {
			return nil, nil, true // never answered
		}
		return nil, nil, false
	})
	sessions := new(atomic.Int64)
	cfg := e.groupConfig("g-restarts", []kgo.Opt{kgo.ServerSideBalancer(),
		kgo.RequestRetries(1), // a session restarts after a retried heartbeat
		kgo.WithLogger(sessionCounter{sessions})})
	c, err := New(cfg, nopHandler())
	if err != nil {
		t.Fatal(err)
	}
	p := newProbe(t, c)
	start(t, c)
	p.awaitReadyz("ready", testTimeout, ready)

	dead.Store(true)
	p.awaitReadyz("not ready", testSessionTimeout+boundSlack, notReadyWith(`group "g-restarts": no heartbeat taken`))
	want := sessions.Load() + 2
	for sessions.Load() < want {
		if code, body := p.readyz(); code != http.StatusServiceUnavailable {
			t.Fatalf("readyz after %d session restarts with no heartbeat answered: %d %q", sessions.Load()-want+2, code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	dead.Store(false)
	p.awaitReadyz("ready again", testTimeout, ready)
}

// sessionCounter is a franz-go logger that counts group sessions begun.
type sessionCounter struct{ n *atomic.Int64 }

func (s sessionCounter) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (s sessionCounter) Log(_ kgo.LogLevel, msg string, _ ...any) {
	if strings.Contains(msg, "new group session begun") {
		s.n.Add(1)
	}
}

// TestNotReadyWhileTakingUpAssignment: the member is not ready while its
// assigned callback takes up new partitions (here held up reading their
// committed offsets): they are not handled yet. Readiness names that, and
// clears once the partitions are taken up.
func TestNotReadyWhileTakingUpAssignment(t *testing.T) {
	e := newGroupEnv(t, 2)
	release := make(chan struct{})
	var held atomic.Bool
	e.c.ControlKey(int16(kmsg.OffsetFetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		if held.CompareAndSwap(false, true) { // the first: lanes' own read of the committed offsets
			e.sleep(release)
		}
		return nil, nil, false
	})
	c, err := New(e.groupConfig("g-takeup", nil), nopHandler())
	if err != nil {
		t.Fatal(err)
	}
	p := newProbe(t, c)
	start(t, c)
	p.awaitReadyz("not ready while the assignment is taken up", testTimeout, notReadyWith(`group "g-takeup": taking up newly assigned partitions`))
	close(release)
	p.awaitReadyz("ready once taken up", testTimeout, ready)
}

// TestTakingUpDoesNotHideSilence: while the assigned callback takes up new
// partitions (which can take up to three CommitTimeouts), a silence past
// the session timeout or a hold in force is what readiness names: the
// group may count the member gone, which matters more than the take-up.
func TestTakingUpDoesNotHideSilence(t *testing.T) {
	clock := time.Unix(1_000_000, 0)
	m := clockedMembership(&clock, 10*time.Second)
	var during string
	m.assigned(func(context.Context, *kgo.Client, map[string][]int32) {
		clock = clock.Add(11 * time.Second) // no heartbeat answered meanwhile
		during = m.reason(clock)
	})(context.Background(), nil, map[string][]int32{"t": {0}})
	if !strings.Contains(during, "no heartbeat taken") {
		t.Fatalf("reason while taking up during a silence past the session timeout: %q; want the silence named", during)
	}
}

// TestTakingUpClearsAfterPanic: a panicking assigned callback does not
// leave the member reported as taking up its partitions for ever.
func TestTakingUpClearsAfterPanic(t *testing.T) {
	lg := zerolog.Nop()
	m := newMembership("g", &lg)
	func() {
		defer func() { _ = recover() }()
		m.assigned(func(context.Context, *kgo.Client, map[string][]int32) {
			panic("injected")
		})(context.Background(), nil, map[string][]int32{"t": {0}})
	}()
	if r := m.reason(time.Now()); r != "" {
		t.Fatalf("reason after the assigned callback panicked: %q; want none", r)
	}
}

// clockedMembership is group "g"'s membership, silent in its logs, on the
// fake clock *clock, with session timeout st.
func clockedMembership(clock *time.Time, st time.Duration) *membership {
	lg := zerolog.Nop()
	m := newMembership("g", &lg)
	m.clock = func() time.Time { return *clock }
	m.sessionTimeout = st
	return m
}
