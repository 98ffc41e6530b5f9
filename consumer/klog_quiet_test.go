package consumer

import (
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCommitBeforeGroupOffsetFetchQuiet: a fresh partition's start
// position is committed by the commit loop as soon as the assignment is
// taken up, which may be answered before franz-go's own offset fetch for
// the new session (it follows OnPartitionsAssigned): franz-go then warns
// "received an OffsetCommitResponse after our group session has ended
// (were we kicked from the group?)". Under lanes' manual commits that is
// only franz-go's bookkeeping (the commit succeeded and lanes read its
// answer): it must not reach the log as a warning on a healthy start.
func TestCommitBeforeGroupOffsetFetchQuiet(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	logs := newLogCapture()
	cfg := e.config("g-commit-quiet", "chats")
	cfg.Logger = &logs.log
	c, err := New(cfg, nopHandler())
	if err != nil {
		t.Fatal(err)
	}
	// franz-go's own offset fetch for the session (it names the member,
	// lanes' in OnPartitionsAssigned does not) is answered "unstable
	// offset commit", which franz-go retries every second, until lanes'
	// first commit, of the start position, was answered.
	committed := make(chan struct{})
	var groupFetches atomic.Int32
	e.c.ControlKey(int16(kmsg.OffsetFetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		req := kr.(*kmsg.OffsetFetchRequest)
		if len(req.Groups) == 0 || req.Groups[0].MemberID == nil {
			return nil, nil, false
		}
		groupFetches.Add(1)
		select {
		case <-committed:
			return nil, nil, false
		default:
		}
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.Version = req.Version
		g := kmsg.NewOffsetFetchResponseGroup()
		g.Group = req.Groups[0].Group
		for _, rt := range req.Groups[0].Topics {
			t := kmsg.NewOffsetFetchResponseGroupTopic()
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
			for _, id := range rt.Partitions {
				p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				p.Partition, p.Offset, p.ErrorCode = id, -1, kerr.UnstableOffsetCommit.Code
				t.Partitions = append(t.Partitions, p)
			}
			g.Topics = append(g.Topics, t)
		}
		resp.Groups = append(resp.Groups, g)
		return resp, nil, true
	})
	stop := start(t, c)
	eventually(t, "the start position committed", func() bool { return c.Stats().Commits > 0 })
	close(committed)
	n := groupFetches.Load()
	eventually(t, "franz-go's offset fetch answered", func() bool { return groupFetches.Load() > n })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, l := range logs.lines("OffsetCommitResponse after our group session has ended") {
		if l["level"] != "debug" {
			t.Fatalf("franz-go's commit bookkeeping warning reached the log as %v:\n%s", l["level"], logs)
		}
	}
	if len(logs.lines("OffsetCommitResponse after our group session has ended")) == 0 {
		t.Fatalf("the scenario did not happen (no commit answered before franz-go's offset fetch):\n%s", logs)
	}
}
