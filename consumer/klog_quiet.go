package consumer

import "strings"

// kgoBookkeeping are franz-go warnings about its own record of commits,
// which lanes does not use: lanes commits with CommitOffsetsSync, reads
// each answer itself (a refused commit is logged, counted and named by
// Health as lanes' own failure) and fences late work by assignment epoch.
//
// "received an OffsetCommitResponse after our group session has ended":
// franz-go has no record for the session yet, or no longer. Not yet: a
// fresh partition's start position is committed as soon as
// OnPartitionsAssigned has read it (with parking, while it goes on
// rebuilding parked sets), before franz-go's own offset fetch for the new
// session fills that record in; so on a healthy start, and after a rejoin
// that brings partitions with no commit. The commit itself succeeded
// (TestCommitBeforeGroupOffsetFetchQuiet). No longer: the session was
// lost while a commit was in flight; lanes logs the partitions lost, and
// the commit's refusal, itself.
var kgoBookkeeping = []string{
	"received an OffsetCommitResponse after our group session has ended",
}

// bookkeeping logs msg at Debug and reports true when it is one of
// kgoBookkeeping.
func (k *kgoLogger) bookkeeping(msg string) bool {
	for _, m := range kgoBookkeeping {
		if strings.HasPrefix(msg, m) {
			k.log.Debug().Str("source", "franz-go").Str("client", k.client).
				Msg(msg + " [franz-go's own record of commits, which lanes does not use: lanes read the commit's answer itself; harmless]")
			return true
		}
	}
	return false
}
