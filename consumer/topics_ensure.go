package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicRun is one CreateTopics or CheckTopics call.
type topicRun struct {
	cfg    *Config
	o      topicOptions
	create bool // CreateTopics: create what is missing (only validate it in a dry run)
	cl     *kgo.Client
	adm    *kadm.Client // on cl
}

// topicInfo is an existing topic as the brokers describe it.
type topicInfo struct {
	exists     bool
	partitions int32
	replicas   int16
	policy     string // cleanup.policy; read for dead-letter and park topics only
}

func ensureTopics(ctx context.Context, cfg Config, create bool, opts []TopicOption) ([]TopicResult, error) {
	t, err := newTopicRun(cfg, create, opts)
	if err != nil {
		return nil, err
	}
	defer t.cl.Close()
	return t.run(ctx)
}

// newTopicRun validates cfg and opts and starts the admin client, which the
// caller closes.
func newTopicRun(cfg Config, create bool, opts []TopicOption) (*topicRun, error) {
	o := topicOptions{replication: -1}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.err != nil {
		return nil, o.err
	}
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.ClientOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("consumer: topics: %w", err)
	}
	return &topicRun{cfg: &cfg, o: o, create: create, cl: cl, adm: kadm.NewClient(cl)}, nil
}

func (t *topicRun) run(ctx context.Context) ([]TopicResult, error) {
	var consumed []string
	for _, s := range t.cfg.Topics {
		if !slices.Contains(consumed, s) {
			consumed = append(consumed, s)
		}
	}
	park := newParkIO(t.cfg) // its topic() names the park topics, as the consumer does
	names := slices.Clone(consumed)
	var withPolicy []string
	if t.cfg.DeadLetterTopic != "" {
		withPolicy = append(withPolicy, t.cfg.DeadLetterTopic)
	}
	if t.cfg.Park.Enabled {
		for _, s := range consumed {
			withPolicy = append(withPolicy, park.topic(s))
		}
	}
	if t.cfg.Control.Enabled {
		withPolicy = append(withPolicy, t.cfg.Control.Topic)
	}
	have, err := t.describe(ctx, append(names, withPolicy...), withPolicy)
	if err != nil {
		return nil, err
	}

	var out []TopicResult
	sizes := map[string]int32{} // consumed topic → its partitions, as it is or will be
	for _, s := range consumed {
		r, err := t.ensure(ctx, TopicResult{Topic: s, Kind: TopicConsumed}, have[s], t.o.consumed, nil, func(*TopicResult, topicInfo) {})
		if err != nil {
			return nil, err
		}
		if r.Err == nil {
			sizes[s] = r.Partitions
		}
		out = append(out, r)
	}
	if d := t.cfg.DeadLetterTopic; d != "" {
		n := t.o.dlqPartitions
		if n == 0 {
			n = -1
			for _, p := range sizes {
				n = max(n, p)
			}
		}
		r, err := t.ensure(ctx, TopicResult{Topic: d, Kind: TopicDeadLetter}, have[d], n, deletePolicy(), t.checkDeadLetter)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if t.cfg.Park.Enabled {
		for _, s := range consumed {
			p := park.topic(s)
			n := sizes[s] // 0 when s is missing: not created then
			check := func(r *TopicResult, info topicInfo) { t.checkPark(r, info, n) }
			r, err := t.ensure(ctx, TopicResult{Topic: p, Kind: TopicPark, Source: s}, have[p], n, deletePolicy(), check)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	if c := t.cfg.Control.Topic; t.cfg.Control.Enabled {
		compact := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
		r, err := t.ensure(ctx, TopicResult{Topic: c, Kind: TopicControl}, have[c], 1, compact, t.checkControl)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	var errs []error
	for _, r := range out {
		if r.Err != nil {
			errs = append(errs, r.Err)
		}
	}
	return out, errors.Join(errs...)
}

func deletePolicy() map[string]*string {
	return map[string]*string{"cleanup.policy": kadm.StringPtr("delete")}
}

// describe asks the brokers about topics, and about the cleanup.policy of
// those of withPolicy that exist.
func (t *topicRun) describe(ctx context.Context, topics, withPolicy []string) (map[string]topicInfo, error) {
	// A metadata request of its own, not kadm's ListTopics: that answers
	// from the client's cache, which still says missing for a topic another
	// run created since.
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false // a look must not create a topic on brokers that auto-create
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, t.cl)
	if err != nil {
		return nil, fmt.Errorf("consumer: topics: describe %s on brokers %s: %w", strings.Join(topics, ", "), strings.Join(t.cfg.Brokers, ","), err)
	}
	have := make(map[string]topicInfo, len(topics))
	var policies []string
	for _, rt := range resp.Topics {
		if rt.Topic == nil || !slices.Contains(topics, *rt.Topic) {
			continue
		}
		name := *rt.Topic
		switch err := kerr.ErrorForCode(rt.ErrorCode); {
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			continue
		case err != nil:
			return nil, fmt.Errorf("consumer: topics: describe %s: %w", name, err)
		}
		info := topicInfo{exists: true, partitions: int32(len(rt.Partitions))}
		if len(rt.Partitions) > 0 {
			info.replicas = int16(len(rt.Partitions[0].Replicas))
		}
		have[name] = info
		if slices.Contains(withPolicy, name) {
			policies = append(policies, name)
		}
	}
	if len(policies) == 0 {
		return have, nil
	}
	rcs, err := t.adm.DescribeTopicConfigs(ctx, policies...)
	if err != nil {
		return nil, fmt.Errorf("consumer: topics: describe the configs of %s: %w", strings.Join(policies, ", "), err)
	}
	for _, name := range policies {
		rc, err := rcs.On(name, nil)
		if err == nil {
			err = rc.Err
		}
		if err != nil {
			return nil, fmt.Errorf("consumer: topics: describe the configs of %s: %w", name, err)
		}
		info := have[name]
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" && c.Value != nil {
				info.policy = *c.Value
			}
		}
		have[name] = info
	}
	return have, nil
}

// ensure fills r: by check when the topic exists; else, in CreateTopics
// and when its partitions are known (not 0), by creating it with
// configs; else as missing. Its error is one that stops the whole run.
func (t *topicRun) ensure(ctx context.Context, r TopicResult, info topicInfo, partitions int32, configs map[string]*string,
	check func(*TopicResult, topicInfo)) (TopicResult, error) {
	if info.exists {
		r.State, r.Partitions, r.ReplicationFactor = TopicOK, info.partitions, info.replicas
		check(&r, info)
		return r, nil
	}
	if !t.create || partitions == 0 {
		r.State, r.Err = TopicMissing, &topicError{ErrTopicMissing, r.label() + ": missing: " + t.advice(r, partitions)}
		return r, nil
	}
	create := t.adm.CreateTopics
	if t.o.dryRun {
		create = t.adm.ValidateCreateTopics
	}
	resps, err := create(ctx, partitions, t.o.replication, configs, r.Topic)
	if err != nil {
		return r, fmt.Errorf("consumer: topics: create %s on brokers %s: %w", r.Topic, strings.Join(t.cfg.Brokers, ","), err)
	}
	resp, ok := resps[r.Topic]
	switch {
	case !ok:
		return r, fmt.Errorf("consumer: topics: create %s: the brokers did not answer for it", r.Topic)
	case errors.Is(resp.Err, kerr.TopicAlreadyExists): // created meanwhile (another run): check it as it is
		policy := []string{r.Topic}
		if r.Kind == TopicConsumed {
			policy = nil
		}
		have, err := t.describe(ctx, []string{r.Topic}, policy)
		if err != nil {
			return r, err
		}
		if !have[r.Topic].exists {
			return r, fmt.Errorf("consumer: topics: create %s: %w, yet the brokers do not describe it", r.Topic, resp.Err)
		}
		return t.ensure(ctx, r, have[r.Topic], partitions, configs, check)
	case resp.Err != nil:
		msg := resp.Err.Error()
		if resp.ErrMessage != "" {
			msg += " (" + resp.ErrMessage + ")"
		}
		rf := "the brokers' default replication factor"
		if t.o.replication > 0 {
			rf = fmt.Sprintf("replication factor %d", t.o.replication)
		}
		r.State, r.Err = TopicMissing, &topicError{ErrTopicMissing, fmt.Sprintf("%s: missing, and the brokers refused to create it with %s and %s: %s",
			r.label(), partitionsText(partitions), rf, msg)}
		return r, nil
	}
	r.State, r.Partitions, r.ReplicationFactor = TopicCreated, partitions, t.o.replication
	if t.o.dryRun {
		r.State = TopicWouldCreate
	}
	if resp.NumPartitions > 0 {
		r.Partitions = resp.NumPartitions
	}
	if resp.ReplicationFactor > 0 {
		r.ReplicationFactor = resp.ReplicationFactor
	}
	if p := configs["cleanup.policy"]; p != nil {
		r.CleanupPolicy = *p
	}
	return r, nil
}

// advice says how to get a missing topic that will be created with
// partitions (0: cannot be, its source is missing).
func (t *topicRun) advice(r TopicResult, partitions int32) string {
	switch {
	case r.Kind == TopicConsumed:
		return "create it first (lanes topics create creates a consumed topic only with --partitions N; " +
			"the park and dead-letter topics are sized from it)"
	case r.Kind == TopicPark && partitions == 0:
		return fmt.Sprintf("it needs the partition count of %s, which is missing: create %s first", r.Source, r.Source)
	}
	if r.Kind == TopicControl {
		return "create it with 1 partition and cleanup.policy=compact (lanes topics create and lanes session pause do; a member finds nothing paused meanwhile)"
	}
	n := partitionsText(partitions)
	if r.Kind == TopicPark {
		n += ", as " + r.Source + " has,"
	}
	return fmt.Sprintf("create it with %s and cleanup.policy=delete (lanes topics create does)", n)
}

func (t *topicRun) checkDeadLetter(r *TopicResult, info topicInfo) {
	r.CleanupPolicy = info.policy
	if strings.Contains(info.policy, "compact") {
		r.State, r.Err = TopicWrong, &topicError{ErrTopicUnfit, fmt.Sprintf("%s: compacted (cleanup.policy=%s): compaction keeps only the last dead letter of each key; %s",
			r.label(), info.policy, setDelete(r.Topic))}
	}
}

// checkControl checks an existing control topic: one partition (its
// entries are read in one order), compacted (a session's last setting is
// what counts; a deleted one would lose pauses to retention).
func (t *topicRun) checkControl(r *TopicResult, info topicInfo) {
	r.CleanupPolicy = info.policy
	var wrong []string
	if info.partitions != 1 {
		wrong = append(wrong, fmt.Sprintf("has %s: the control topic needs exactly 1; once no session is paused (lanes session list), delete %s and run lanes topics create again",
			partitionsText(info.partitions), r.Topic))
	}
	if !strings.Contains(info.policy, "compact") || strings.Contains(info.policy, "delete") {
		wrong = append(wrong, fmt.Sprintf("cleanup.policy=%s: it must be compact alone (retention would drop a session's pause); kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact",
			info.policy, r.Topic))
	}
	if len(wrong) > 0 {
		r.State, r.Err = TopicWrong, &topicError{ErrTopicUnfit, r.label() + ": " + strings.Join(wrong, "; and ")}
	}
}

// checkPark checks an existing park topic against its source's partition
// count (0: unknown, the source is missing) and its policy, as the
// consumer's own check does at each assignment (parkIO.check).
func (t *topicRun) checkPark(r *TopicResult, info topicInfo, source int32) {
	r.CleanupPolicy = info.policy
	var wrong []string
	switch {
	case source == 0 || info.partitions == source:
	case info.partitions < source:
		wrong = append(wrong, fmt.Sprintf("has %s, %s has %d: they must be equal (park partition p holds what is parked from partition p); "+
			"add partitions: kafka-topics.sh --alter --topic %s --partitions %d", partitionsText(info.partitions), r.Source, source, r.Topic, source))
	default:
		wrong = append(wrong, fmt.Sprintf("has %s, %s has %d: they must be equal (park partition p holds what is parked from partition p); "+
			"partitions cannot be removed: once no session is parked (lanes park inspect), delete %s and run lanes topics create again",
			partitionsText(info.partitions), r.Source, source, r.Topic))
	}
	if strings.Contains(info.policy, "compact") {
		wrong = append(wrong, fmt.Sprintf("compacted (cleanup.policy=%s): compaction deletes parked records; %s", info.policy, setDelete(r.Topic)))
	}
	if len(wrong) > 0 {
		r.State, r.Err = TopicWrong, &topicError{ErrTopicUnfit, r.label() + ": " + strings.Join(wrong, "; and ")}
	}
}

func setDelete(topic string) string {
	return "set cleanup.policy=delete: kafka-configs.sh --alter --entity-type topics --entity-name " + topic + " --add-config cleanup.policy=delete"
}

// CreateTopics creates the topics a consumer with cfg needs and checks
// those that exist, as [New] would run it (cfg is validated like New does;
// a bad one is an ErrConfig error). It connects with cfg.Brokers and
// cfg.ClientOptions (TLS, SASL). Running it again changes nothing that is
// right: it is idempotent, and safe to run at every deploy.
//
//   - Each consumed topic (Config.Topics) must exist: it is not created
//     unless TopicsCreateConsumed is given.
//   - The dead-letter topic (Config.DeadLetterTopic, when set) is created
//     with cleanup.policy=delete and, unless TopicsDeadLetterPartitions
//     says otherwise, the partition count of the largest consumed topic;
//     an existing one must not be compacted (compaction would keep only
//     the last dead letter of each key).
//   - With Config.Park.Enabled, the park topic of each consumed topic (the
//     topic plus Park.TopicSuffix) is created with its source's partition
//     count and cleanup.policy=delete; an existing one must have its
//     source's partition count and not be compacted
//     (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#creating-the-topics).
//
// Topics are created with the brokers' default replication factor unless
// TopicsReplicationFactor is given, and their default retention: keep a
// park topic's longer than a session may stay parked plus the longest
// outage of the group
// (https://github.com/lanesdev/lanes/blob/main/docs/parking.md#creating-the-topics).
//
// It returns one result per topic: the consumed topics in Config order,
// then the dead-letter topic, then the park topics. The error is nil when
// every topic exists (or was created) and fits; otherwise it joins the
// errors of the results that are missing or wrong (each wraps
// ErrTopicMissing or ErrTopicUnfit and names its topic and the fix). When
// the brokers cannot be asked, it is that error, with no results.
func CreateTopics(ctx context.Context, cfg Config, opts ...TopicOption) ([]TopicResult, error) {
	return ensureTopics(ctx, cfg, true, opts)
}

// CheckTopics checks the topics [CreateTopics] would create, creating
// nothing: a topic CreateTopics would create is TopicMissing. It only
// reads. Of the options, only TopicsDeadLetterPartitions matters (the
// count its advice names).
func CheckTopics(ctx context.Context, cfg Config, opts ...TopicOption) ([]TopicResult, error) {
	return ensureTopics(ctx, cfg, false, opts)
}
