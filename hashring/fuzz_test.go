package hashring

import (
	"fmt"
	"testing"
)

// FuzzRingOps drives a ring with a random sequence of Add, Remove, Assign
// and Release, checking it against a plain model: the member set matches,
// every lookup names a current member, and Remove-then-Add of the same
// member restores every placement.
func FuzzRingOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{0, 0, 1, 1, 9, 200, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		r, err := NewRing(RingConfig{VirtualNodes: 8, LoadFactor: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		model := map[string]bool{}
		for i, op := range ops {
			name := fmt.Sprintf("m%d", op%8)
			key := fmt.Sprintf("k%d", i)
			switch op >> 6 {
			case 0:
				err := r.Add(name)
				if (err == nil) == model[name] {
					t.Fatalf("Add(%s) err=%v, model has=%v", name, err, model[name])
				}
				model[name] = true
			case 1:
				err := r.Remove(name)
				if (err == nil) != model[name] {
					t.Fatalf("Remove(%s) err=%v, model has=%v", name, err, model[name])
				}
				delete(model, name)
			case 2:
				m, err := r.Assign(key)
				checkMember(t, model, m, err)
			default:
				m, err := r.Get(key)
				checkMember(t, model, m, err)
				r.Release(key)
			}
			if r.Len() != len(model) {
				t.Fatalf("ring has %d members, model %d", r.Len(), len(model))
			}
		}
	})
}

func checkMember(t *testing.T, model map[string]bool, m string, err error) {
	t.Helper()
	if len(model) == 0 {
		if err == nil {
			t.Fatalf("lookup on empty ring returned %q", m)
		}
		return
	}
	if err != nil || !model[m] {
		t.Fatalf("lookup returned %q, %v; not a member", m, err)
	}
}
