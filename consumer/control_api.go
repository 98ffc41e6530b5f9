package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lanesdev/lanes/consumer/internal/clip"
	"github.com/lanesdev/lanes/consumer/internal/control"
)

// The operator's side of per-session control: PauseSession,
// ResumeSession and LimitSession write a session's setting to the control
// topic (lanes session pause|resume|limit); ListControlled reads them back
// (lanes session list). Every member of the group reads the topic
// (control_log.go): nobody needs to know which member owns the session.

// ControlTarget names the group whose sessions a control entry is for,
// and where the control topic is.
type ControlTarget struct {
	Brokers []string // seed brokers; required
	Group   string   // the consumer group; required
	// Topic is the group's Control.Topic. Default: [DefaultControlTopic].
	Topic string
	// By names who writes, shown with the setting. Default: user@host of
	// this process.
	By string
	// ReplicationFactor of the control topic when it is created here (-1 or
	// 0: the brokers' default).
	ReplicationFactor int16
	// ClientOptions are passed to the franz-go client (TLS, SASL).
	ClientOptions []kgo.Opt
}

func (ct ControlTarget) validate() (ControlTarget, error) {
	switch {
	case len(ct.Brokers) == 0:
		return ct, fmt.Errorf("%w: ControlTarget.Brokers: at least one seed broker is required", ErrConfig)
	case ct.Group == "":
		return ct, fmt.Errorf("%w: ControlTarget.Group: required", ErrConfig)
	case strings.ContainsRune(ct.Group, 0):
		return ct, fmt.Errorf("%w: ControlTarget.Group: must not contain a NUL byte", ErrConfig)
	}
	orDefault(&ct.Topic, DefaultControlTopic)
	if ct.By == "" {
		ct.By = whoAmI()
	}
	if ct.ReplicationFactor == 0 {
		ct.ReplicationFactor = -1
	}
	return ct, nil
}

// whoAmI is user@host of this process, as far as it is known.
func whoAmI() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

// PauseSession pauses session of topic for ct.Group: every member stops
// starting its records within Control.Interval; they wait in order (with
// parking on they are parked, and its partition moves on) until
// ResumeSession. A rate set before is kept. It creates the control topic
// when it is missing.
func PauseSession(ctx context.Context, ct ControlTarget, topic, session, reason string) (ControlledSession, error) {
	return changeSetting(ctx, ct, topic, session, func(s *control.Setting) error {
		s.Paused = true
		s.Reason = cmp.Or(reason, s.Reason)
		return nil
	})
}

// ResumeSession resumes a session PauseSession paused: its waiting records
// run, in order, and its parked ones are retried at once. It returns an
// error wrapping ErrNotPaused when the session is not paused.
func ResumeSession(ctx context.Context, ct ControlTarget, topic, session string) (ControlledSession, error) {
	return changeSetting(ctx, ct, topic, session, func(s *control.Setting) error {
		if !s.Paused {
			return fmt.Errorf("%w: session %q of topic %s for group %s: list the paused ones with lanes session list", ErrNotPaused, session, topic, ct.Group)
		}
		s.Paused = false
		return nil
	})
}

// LimitSession limits session of topic for ct.Group to l.Rate records
// per second in bursts of l.Burst (a zero Limit removes the session's own
// limit: ThrottlePolicy.Session applies again). A pause is kept.
func LimitSession(ctx context.Context, ct ControlTarget, topic, session string, l Limit, reason string) (ControlledSession, error) {
	switch {
	case l.Rate < 0 || math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0):
		return ControlledSession{}, fmt.Errorf("%w: rate: must be a finite number not below 0, got %v", ErrConfig, l.Rate)
	case l.Burst < 0:
		return ControlledSession{}, fmt.Errorf("%w: burst: must not be negative, got %d", ErrConfig, l.Burst)
	case l.Concurrency != 0:
		return ControlledSession{}, fmt.Errorf("%w: concurrency: a session runs one record at a time; limit resources with Throttle", ErrConfig)
	}
	return changeSetting(ctx, ct, topic, session, func(s *control.Setting) error {
		s.Rate, s.Burst = l.Rate, l.Burst
		s.Reason = cmp.Or(reason, s.Reason)
		return nil
	})
}

// ListControlled lists the sessions ct.Group has paused or limited, oldest
// setting first (none when the control topic does not exist).
func ListControlled(ctx context.Context, ct ControlTarget) ([]ControlledSession, error) {
	ct, err := ct.validate()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(ct.Brokers...)}, ct.ClientOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("consumer: control: %w", err)
	}
	defer cl.Close()
	m, err := readSettings(ctx, ct, cl)
	if err != nil {
		return nil, err
	}
	out := make([]ControlledSession, 0, len(m))
	for k, s := range m {
		out = append(out, controlled(k, s))
	}
	sortControlled(out)
	return out, nil
}

func controlled(k control.Key, s control.Setting) ControlledSession {
	return ControlledSession{Topic: k.Topic, Session: k.Session, Paused: s.Paused, Rate: s.Rate, Burst: s.Burst,
		By: s.By, At: s.At, Reason: s.Reason, TopicID: s.TopicID}
}

// readSettings reads ct.Group's settings from the control topic (none
// when it is missing).
func readSettings(ctx context.Context, ct ControlTarget, cl *kgo.Client) (map[control.Key]control.Setting, error) {
	nop := zerolog.Nop()
	cfg := &Config{Brokers: ct.Brokers, ClientOptions: ct.ClientOptions, Control: ControlPolicy{Topic: ct.Topic}, FetchMaxWait: DefaultFetchMaxWait, Logger: &nop}
	log := newControlLog(cfg)
	_, start, end, err := log.span(ctx, cl)
	if errors.Is(err, errControlMissing) {
		return map[control.Key]control.Setting{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("consumer: control: control topic %s: %w", ct.Topic, err)
	}
	m := map[control.Key]control.Setting{}
	err = readRange(ctx, cfg, "control", ct.Topic, 0, start, end, func(r *kgo.Record) {
		group, k, s, err := control.Decode(r.Key, r.Value)
		switch {
		case err != nil || group != ct.Group:
		case s.Empty():
			delete(m, k)
		default:
			m[k] = s
		}
	})
	if err != nil {
		return nil, fmt.Errorf("consumer: control: read %s: %w", ct.Topic, err)
	}
	return m, nil
}

// changeSetting reads session's setting, changes it with change and
// writes it back (a tombstone when it controls nothing any more).
func changeSetting(ctx context.Context, ct ControlTarget, topic, session string, change func(*control.Setting) error) (ControlledSession, error) {
	ct, err := ct.validate()
	if err != nil {
		return ControlledSession{}, err
	}
	switch {
	case topic == "":
		return ControlledSession{}, fmt.Errorf("%w: topic: required", ErrConfig)
	case session == "":
		return ControlledSession{}, fmt.Errorf("%w: session: required (records without a key share their partition's lane: see Config.SessionKey)", ErrConfig)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(ct.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner())}, ct.ClientOptions...)...)
	if err != nil {
		return ControlledSession{}, fmt.Errorf("consumer: control: %w", err)
	}
	defer cl.Close()
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return ControlledSession{}, fmt.Errorf("consumer: control: look up topic %s: %w", topic, err)
	}
	if td[topic].Err != nil {
		return ControlledSession{}, fmt.Errorf("%w: topic %s: %v: name a topic the group consumes", ErrTopicMissing, topic, td[topic].Err)
	}
	m, err := readSettings(ctx, ct, cl)
	if err != nil {
		return ControlledSession{}, err
	}
	k := control.Key{Topic: topic, Session: session}
	s := m[k]
	was := s
	if err := change(&s); err != nil {
		return ControlledSession{}, err
	}
	s.By, s.Reason, s.TopicID = ct.By, clip.UTF8(s.Reason, maxControlReason), td[topic].ID.String()
	if s.At.IsZero() || s.Paused != was.Paused {
		s.At = time.Now().UTC() // since when it is paused (or limited): a limit set on a paused session keeps its pause's age
	}
	if err := ensureControlTopic(ctx, kadm.NewClient(cl), ct); err != nil {
		return ControlledSession{}, err
	}
	key, value, err := control.Encode(ct.Group, k, s)
	if err != nil {
		return ControlledSession{}, err
	}
	rec := &kgo.Record{Topic: ct.Topic, Partition: 0, Key: key, Value: value}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return ControlledSession{}, fmt.Errorf("consumer: control: write the setting of session %q of %s to %s: %w", session, topic, ct.Topic, err)
	}
	return controlled(k, s), nil
}

// maxControlReason bounds the reason kept with a setting, in bytes.
const maxControlReason = 1024

// ensureControlTopic creates the control topic (one partition, compacted)
// when it is missing.
func ensureControlTopic(ctx context.Context, adm *kadm.Client, ct ControlTarget) error {
	td, err := adm.ListTopics(ctx, ct.Topic)
	if err != nil {
		return fmt.Errorf("consumer: control: look up %s: %w", ct.Topic, err)
	}
	if t, ok := td[ct.Topic]; ok && t.Err == nil {
		if len(t.Partitions) != 1 {
			return fmt.Errorf("consumer: control: control topic %s has %d partitions, needs 1: make it again with one, compacted", ct.Topic, len(t.Partitions))
		}
		return nil
	}
	compact := "compact"
	r, err := adm.CreateTopic(ctx, 1, ct.ReplicationFactor, map[string]*string{"cleanup.policy": &compact}, ct.Topic)
	if err == nil {
		err = r.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("consumer: control: create the control topic %s (1 partition, compacted): %w; create it yourself or with lanes topics create", ct.Topic, err)
	}
	return nil
}

// PauseSession pauses session of topic for this consumer's group (the
// package's PauseSession with Config's brokers and control topic); this
// member reads it back at once, the others within Control.Interval.
func (c *Consumer) PauseSession(ctx context.Context, topic, session, reason string) (ControlledSession, error) {
	return c.control(ctx, func(ct ControlTarget) (ControlledSession, error) {
		return PauseSession(ctx, ct, topic, session, reason)
	})
}

// ResumeSession resumes session of topic for this consumer's group.
func (c *Consumer) ResumeSession(ctx context.Context, topic, session string) (ControlledSession, error) {
	return c.control(ctx, func(ct ControlTarget) (ControlledSession, error) { return ResumeSession(ctx, ct, topic, session) })
}

// LimitSession limits session of topic for this consumer's group.
func (c *Consumer) LimitSession(ctx context.Context, topic, session string, l Limit, reason string) (ControlledSession, error) {
	return c.control(ctx, func(ct ControlTarget) (ControlledSession, error) {
		return LimitSession(ctx, ct, topic, session, l, reason)
	})
}

func (c *Consumer) control(ctx context.Context, write func(ControlTarget) (ControlledSession, error)) (ControlledSession, error) {
	return c.controlAs(ctx, "", write)
}

// controlAs writes a setting through write as by ("": this process's
// user@host) and has this member read it back at once.
func (c *Consumer) controlAs(_ context.Context, by string, write func(ControlTarget) (ControlledSession, error)) (ControlledSession, error) {
	if c.ctlLog == nil {
		return ControlledSession{}, fmt.Errorf("%w: Control.Enabled is false: turn per-session control on to pause or limit sessions", ErrConfig)
	}
	s, err := write(ControlTarget{Brokers: c.cfg.Brokers, Group: c.cfg.Group, Topic: c.cfg.Control.Topic, By: by, ClientOptions: c.cfg.ClientOptions})
	if err == nil {
		select {
		case c.ctlLog.kick <- struct{}{}: // read it now
		default:
		}
	}
	return s, err
}
