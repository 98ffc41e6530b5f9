package consumer

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestUndecodable(t *testing.T) {
	base := errors.New("bad magic byte")
	u := Undecodable(base)
	if !IsPermanent(u) || !errors.Is(u, base) || permanentReason(u) != ReasonDecode {
		t.Fatalf("Undecodable(%v): permanent %v, reason %q", base, IsPermanent(u), permanentReason(u))
	}
	if permanentReason(Permanent(base)) != ReasonPermanent || Undecodable(nil) != nil {
		t.Fatal("Permanent's reason changed, or Undecodable(nil) != nil")
	}
	if r := permanentReason(fmt.Errorf("wrapped: %w", base)); r != "" {
		t.Fatalf("permanentReason of an error not marked permanent = %q; want none (it would be dead-lettered at once)", r)
	}
}

// TestIsUndecodable: IsUndecodable tells an Undecodable error, however
// wrapped, from a Permanent one and from a plain error.
func TestIsUndecodable(t *testing.T) {
	base := errors.New("bad magic byte")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"undecodable", Undecodable(base), true},
		{"wrapped", fmt.Errorf("order: %w", Undecodable(base)), true},
		{"joined", errors.Join(errors.New("x"), Undecodable(base)), true},
		{"permanent", Permanent(base), false},
		{"permanent of undecodable", Permanent(Undecodable(base)), true},
		{"plain", base, false},
		{"park", Park(base), false},
		{"nil", nil, false},
	} {
		if got := IsUndecodable(tc.err); got != tc.want {
			t.Errorf("%s: IsUndecodable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestUndecodableDeadLettered: a handler's Undecodable error is never
// retried: the record is dead-lettered on its first attempt with reason
// decode and the error in its headers; the session's next record runs
// after it.
func TestUndecodableDeadLettered(t *testing.T) {
	e := newEnv(t, 1, "chats", "dlq")
	e.produce("chats", []string{"a"}, 3)
	rec := newRecorder(3, func(ctx context.Context, m *Message) error {
		if string(m.Record.Value) == "a|1" {
			return Undecodable(errors.New("schema 7 not found"))
		}
		return nil
	})
	c := runAll(t, e.config("g-decode", "chats"), rec, 1)
	checkOrder(t, rec, []string{"chats"}, []string{"a"}, 3)
	st := c.Stats()
	if st.DeadLetteredByReason[ReasonDecode] != 1 || st.Retries != 0 {
		t.Errorf("DLQ by reason %v, retries %d: want 1 decode, no retry", st.DeadLetteredByReason, st.Retries)
	}
	dlq := readDLQ(t, e, 1)
	want := map[string]string{HeaderDLQReason: string(ReasonDecode), HeaderDLQAttempts: "1", HeaderDLQError: "decode: schema 7 not found"}
	for k, v := range want {
		if got := header(dlq[0], k); got != v {
			t.Errorf("DLQ header %s = %q, want %q", k, got, v)
		}
	}
}
