package consumer

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestParkHeldWhileCommitsUnread: a partition with parking on whose
// group's committed offsets cannot be read at its assignment (the
// read fails) is held, with Health
// saying so, rather than rebuilt as if the group had no park position
// (which would start at the new fence and forget the sessions parked
// before it: here s|0, parked, with the commit past it, never handled).
// Once the commits can be read, the park loop's rebuild finds the parked
// session, and every message of s is handled once, in order.
func TestParkHeldWhileCommitsUnread(t *testing.T) {
	e := newEnv(t, 1, "chats", "chats.park", "dlq")
	produceSeqs(t, e, "chats", "s", 0, 5)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	// The world a former owner left: its fence, s|0 parked (due now), and
	// its commit past s|0 naming the park position of the copy.
	cl := e.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	io := newParkIO(&Config{Group: "g-unread", Park: ParkPolicy{TopicSuffix: DefaultParkTopicSuffix}})
	now := time.Now()
	for _, r := range []*kgo.Record{
		io.w.Fence("chats", 0, 1, "classic", "", false),
		io.w.Copy(&kgo.Record{Topic: "chats", Offset: 0, Key: []byte("s"), Value: []byte("s|0")}, "s", 0, 1, now, now, "failing"),
	} {
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var to kadm.Offsets
	to.Add(kadm.Offset{Topic: "chats", Partition: 0, At: 1, LeaderEpoch: -1, Metadata: ";park2:1,0,1,classic,,"})
	if resps, err := kadm.NewClient(cl).CommitOffsets(ctx, "g-unread", to); err != nil || resps.Error() != nil {
		t.Fatal(err, resps.Error())
	}

	// lanes' own reads of the group's commits (franz-go's, which name the
	// member, are answered) fail until the test lets them through.
	unreadable, _ := e.refuseCommitReads()
	rec := newRecorder(5, nil)
	cfg := e.config("g-unread", "chats")
	cfg.Park.Enabled = true
	cfg.Park.Delay, cfg.CommitTimeout = 100*time.Millisecond, 500*time.Millisecond
	c, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	eventually(t, "chats/0 held: its park position unread", func() bool {
		for _, r := range c.Health().Reasons {
			if strings.Contains(r, "parked sessions unavailable, partition held") {
				return true
			}
		}
		return false
	})
	if n := len(rec.snapshot()); n != 0 {
		t.Fatalf("%d handler calls while the park position was unread; want none", n)
	}
	unreadable.Store(false)
	rec.wait(t)
	checkOrder(t, rec, []string{"chats"}, []string{"s"}, 5)
}

// refuseCommitReads has the broker refuse lanes' own reads of a group's
// committed offsets (GROUP_AUTHORIZATION_FAILED) while the returned flag
// is set, as it is at first; franz-go's own reads, which name the member,
// are answered. refused counts the reads refused.
func (e *env) refuseCommitReads() (unreadable *atomic.Bool, refused *atomic.Int64) {
	unreadable, refused = new(atomic.Bool), new(atomic.Int64)
	unreadable.Store(true)
	e.c.ControlKey(int16(kmsg.OffsetFetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		req := kr.(*kmsg.OffsetFetchRequest)
		if !unreadable.Load() || len(req.Groups) == 0 || req.Groups[0].MemberID != nil {
			return nil, nil, false
		}
		refused.Add(1)
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.Version = req.Version
		g := kmsg.NewOffsetFetchResponseGroup()
		g.Group, g.ErrorCode = req.Groups[0].Group, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, g)
		return resp, nil, true
	})
	return unreadable, refused
}
