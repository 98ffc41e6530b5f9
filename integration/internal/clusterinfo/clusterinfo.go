// Package clusterinfo answers questions about a running Kafka cluster that
// the fault scenarios and kafka.sh ask: which node leads a partition, which
// is the active KRaft controller, and whether every replica is in sync.
package clusterinfo

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Leader returns the node ID leading topic's partition.
func Leader(ctx context.Context, cl *kgo.Client, topic string, partition int32) (int32, error) {
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return -1, fmt.Errorf("metadata of topic %s: %w", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return -1, fmt.Errorf("topic %s: not in the metadata (%v): check its name", topic, td.Err)
	}
	pd, ok := td.Partitions[partition]
	if !ok {
		return -1, fmt.Errorf("topic %s has no partition %d (it has %d)", topic, partition, len(td.Partitions))
	}
	if pd.Err != nil || pd.Leader < 0 {
		return -1, fmt.Errorf("topic %s partition %d: %w (%v)", topic, partition, ErrNoLeader, pd.Err)
	}
	return pd.Leader, nil
}

// Leaders returns the node ID leading each of topic's partitions (-1 for a
// partition without a leader right now).
func Leaders(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int32, error) {
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("metadata of topic %s: %w", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("topic %s: not in the metadata (%v): check its name", topic, td.Err)
	}
	out := make(map[int32]int32, len(td.Partitions))
	for p, pd := range td.Partitions {
		out[p] = pd.Leader
	}
	return out, nil
}

// Controller returns the node ID of the active KRaft controller, the leader
// of the metadata quorum (DescribeQuorum on __cluster_metadata; the
// metadata response's controller ID is a random broker under KRaft).
func Controller(ctx context.Context, cl *kgo.Client) (int32, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rp.Partition = 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, fmt.Errorf("describe the metadata quorum: %w", err)
	}
	if err := errFor(resp.ErrorCode); err != nil {
		return -1, fmt.Errorf("describe the metadata quorum: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, errors.New("describe the metadata quorum: the answer holds no __cluster_metadata partition")
	}
	p := resp.Topics[0].Partitions[0]
	if err := errFor(p.ErrorCode); err != nil {
		return -1, fmt.Errorf("describe the metadata quorum: %w", err)
	}
	if p.LeaderID < 0 {
		return -1, errors.New("the metadata quorum has no leader right now (an election is under way): ask again")
	}
	return p.LeaderID, nil
}

// UnderReplicated returns the partitions of topics (all topics if none)
// whose in-sync replicas are fewer than their replicas, as "topic/p"
// strings: empty when the cluster is fully replicated.
func UnderReplicated(ctx context.Context, cl *kgo.Client, topics ...string) ([]string, error) {
	md, err := kadm.NewClient(cl).Metadata(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	var out []string
	md.Topics.EachPartition(func(pd kadm.PartitionDetail) {
		if pd.Err != nil || pd.Leader < 0 || len(pd.ISR) < len(pd.Replicas) {
			out = append(out, fmt.Sprintf("%s/%d", pd.Topic, pd.Partition))
		}
	})
	slices.Sort(out)
	return out, nil
}

func errFor(code int16) error { return kerr.ErrorForCode(code) }

// GroupCoordinator returns the node ID coordinating the consumer group.
func GroupCoordinator(ctx context.Context, cl *kgo.Client, group string) (int32, error) {
	r, ok := kadm.NewClient(cl).FindGroupCoordinators(ctx, group)[group]
	if !ok {
		return -1, fmt.Errorf("find the coordinator of group %s: no answer", group)
	}
	if r.Err != nil {
		return -1, fmt.Errorf("find the coordinator of group %s: %w (%s)", group, r.Err, r.ErrMessage)
	}
	return r.NodeID, nil
}
