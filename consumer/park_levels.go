package consumer

// parkLevels are the placement counts of the records parked on a
// partition, per session: runs of records from a source offset on, with
// one count, oldest first (a session's parked records are in source order,
// and their count changes only at a growth). A growth's commits name the
// sessions whose remaining parked records include one of a count older
// than the newest, with the oldest such count (parkedOldLocked). Guarded
// by the partition's lock.
type parkLevels map[string][]levelRun

// levelRun is a session's parked records from source offset from on,
// placed with count level (0: none known, an unstamped record or a stub).
type levelRun struct {
	from  int64
	level int
}

// note records a record of session s parked at source offset src with
// count level; was says s was parked before it (else its runs start anew).
func (pl *parkLevels) note(s string, src int64, level int, was bool) {
	if *pl == nil {
		*pl = parkLevels{}
	}
	runs := (*pl)[s]
	switch {
	case !was:
		runs = []levelRun{{src, level}}
	case len(runs) == 0 || runs[len(runs)-1].level != level:
		runs = append(runs, levelRun{src, level})
	}
	(*pl)[s] = runs
}

// oldest is the oldest count of s's parked records from source offset head
// on (the head of its parked records; those before are done), dropping the
// runs that ended before it. ok is false when s has none.
func (pl parkLevels) oldest(s string, head int64) (level int, ok bool) {
	runs := pl[s]
	for len(runs) > 1 && runs[1].from <= head {
		runs = runs[1:]
	}
	if len(runs) == 0 {
		return 0, false
	}
	pl[s] = runs
	level = runs[0].level
	for _, r := range runs[1:] {
		level = min(level, r.level)
	}
	return level, true
}
