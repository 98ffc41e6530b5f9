package console

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/cmd/lanes/internal/dlq"
	"github.com/lanesdev/lanes/consumer"
)

// view is what the group page shows, gathered from what Kafka holds.
type view struct {
	Now        time.Time
	Group      string
	State      string // the group's state, as the coordinator says
	Protocol   string // classic or consumer (KIP-848)
	Members    []member
	Partitions []partition
	Parked     []parkedRow
	ParkNotes  []string // topics without a park topic, read errors
	Controlled []consumer.ControlledSession
	DLQ        string // the dead-letter topic counted ("" none)
	DLQTotal   int
	DLQReasons []reasonCount
	Errors     []string // what could not be read, and why
	Refresh    int
	// With --actions: the forms' token, the last action's outcome, the
	// last replay's state.
	Actions            bool
	Token, Did, Replay string
}

type member struct {
	ID, ClientID, Host string
	Partitions         []string // topic/partition assigned
}

type partition struct {
	Topic     string
	Partition int32
	Committed int64 // -1: none
	End       int64
	Lag       int64 // -1: unknown
	Owner     string
	Metadata  string // the commit's lanes metadata, cut
}

// parkedRow is a parked session, and whether it is paused (its records
// are parked because an operator paused it, not failing).
type parkedRow struct {
	consumer.ParkedSession
	Paused bool
}

type reasonCount struct {
	Reason string
	N      int
}

// options are the console's flags.
type options struct {
	brokers    []string
	group      string
	dlq        string
	parkSuffix string
	ctlTopic   string
	opts       []kgo.Opt
	timeout    time.Duration
	actions    bool
}

// gather reads the group's view from the brokers. What cannot be read
// is named in Errors; the rest is shown.
func gather(ctx context.Context, o options, cl *kgo.Client) view {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	v := view{Now: time.Now(), Group: o.group, DLQ: o.dlq, Refresh: 10}
	adm := kadm.NewClient(cl)
	fail := func(what string, err error) { v.Errors = append(v.Errors, what+": "+err.Error()) }
	owners := v.members(ctx, adm, fail)
	offs, err := adm.FetchOffsets(ctx, o.group)
	if err != nil {
		fail("committed offsets", err)
	}
	var topics []string
	offs.Each(func(r kadm.OffsetResponse) {
		if !slices.Contains(topics, r.Topic) {
			topics = append(topics, r.Topic)
		}
	})
	sort.Strings(topics)
	ends := kadm.ListedOffsets{}
	if len(topics) > 0 {
		if ends, err = adm.ListEndOffsets(ctx, topics...); err != nil {
			fail("end offsets", err)
		}
	}
	offs.Each(func(r kadm.OffsetResponse) {
		p := partition{Topic: r.Topic, Partition: r.Partition, Committed: r.At, End: -1, Lag: -1,
			Owner: owners[fmt.Sprintf("%s/%d", r.Topic, r.Partition)], Metadata: cut(r.Metadata, 120)}
		if e, ok := ends.Lookup(r.Topic, r.Partition); ok && e.Err == nil {
			p.End = e.Offset
			if p.Committed >= 0 {
				p.Lag = max(e.Offset-p.Committed, 0)
			}
		}
		v.Partitions = append(v.Partitions, p)
	})
	slices.SortFunc(v.Partitions, func(a, b partition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	for _, t := range topics {
		ps, err := consumer.InspectParked(ctx, consumer.ParkTarget{Brokers: o.brokers, Group: o.group, Topic: t, TopicSuffix: o.parkSuffix, ClientOptions: o.opts})
		switch {
		case errors.Is(err, consumer.ErrTopicMissing):
			v.ParkNotes = append(v.ParkNotes, fmt.Sprintf("%s: no park topic %s%s (parking off for it)", t, t, o.parkSuffix))
		case err != nil:
			fail("parked sessions of "+t, err)
		default:
			for _, p := range ps {
				v.Parked = append(v.Parked, parkedRow{ParkedSession: p})
			}
		}
	}
	if v.Controlled, err = consumer.ListControlled(ctx, consumer.ControlTarget{Brokers: o.brokers, Group: o.group, Topic: o.ctlTopic, ClientOptions: o.opts}); err != nil {
		fail("paused and limited sessions", err)
	}
	for i, p := range v.Parked {
		v.Parked[i].Paused = slices.ContainsFunc(v.Controlled, func(c consumer.ControlledSession) bool {
			return c.Paused && c.Topic == p.Topic && c.Session == p.Session
		})
	}
	if o.dlq != "" {
		counts, total, err := dlq.CountByReason(ctx, o.brokers, o.dlq, o.opts, o.timeout)
		if err != nil {
			fail("dead-letter topic "+o.dlq, err)
		}
		v.DLQTotal = total
		for r, n := range counts {
			v.DLQReasons = append(v.DLQReasons, reasonCount{r, n})
		}
		slices.SortFunc(v.DLQReasons, func(a, b reasonCount) int { return strings.Compare(a.Reason, b.Reason) })
	}
	return v
}

// members fills in the group's members, state and protocol, and returns
// each assigned partition's owner. A group of the consumer protocol
// (KIP-848) is described by ConsumerGroupDescribe, a classic one by
// DescribeGroups.
func (v *view) members(ctx context.Context, adm *kadm.Client, fail func(string, error)) map[string]string {
	owners := map[string]string{}
	if cg, err := adm.DescribeConsumerGroups(ctx, v.Group); err == nil {
		if g, ok := cg[v.Group]; ok && g.Err == nil && len(g.Members) > 0 {
			v.State, v.Protocol = g.State, "consumer (KIP-848)"
			for _, m := range g.Members {
				mm := member{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
				for t, ps := range m.Assignment {
					for p := range ps {
						name := fmt.Sprintf("%s/%d", t, p)
						mm.Partitions = append(mm.Partitions, name)
						owners[name] = short(m.MemberID)
					}
				}
				sort.Strings(mm.Partitions)
				v.Members = append(v.Members, mm)
			}
			return owners
		}
	}
	dg, err := adm.DescribeGroups(ctx, v.Group)
	if err != nil {
		fail("the group's members", err)
		return owners
	}
	g, ok := dg[v.Group]
	if !ok || g.Err != nil {
		if ok {
			fail("the group's members", g.Err)
		}
		return owners
	}
	v.State, v.Protocol = g.State, "classic"
	for _, m := range g.Members {
		mm := member{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				for _, p := range t.Partitions {
					name := fmt.Sprintf("%s/%d", t.Topic, p)
					mm.Partitions = append(mm.Partitions, name)
					owners[name] = short(m.MemberID)
				}
			}
		}
		sort.Strings(mm.Partitions)
		v.Members = append(v.Members, mm)
	}
	return owners
}

// Topics are the topics of the partitions shown.
func (v view) Topics() []string {
	var out []string
	for _, p := range v.Partitions {
		if !slices.Contains(out, p.Topic) {
			out = append(out, p.Topic)
		}
	}
	return out
}

// short is a member ID's tail, enough to tell members apart.
func short(id string) string {
	if len(id) > 8 {
		return "…" + id[len(id)-8:]
	}
	return id
}

// cut is s cut to n bytes, marked.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
