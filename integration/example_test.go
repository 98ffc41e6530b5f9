package integration_test

import (
	"fmt"
	"time"

	"github.com/lanesdev/lanes/integration"
)

// The ledger accounts for every message: what was acknowledged, every
// handler call, and the dead-letter topic; Report finds order violations
// and losses.
func ExampleLedger() {
	l := integration.NewLedger()
	l.Sent("chat-1", 0, "id-0")
	l.Sent("chat-1", 1, "id-1")
	l.Sent("chat-1", 2, "id-2")
	t0 := time.Now()
	l.Handled(integration.Call{Session: "chat-1", Seq: 0, EventID: "id-0", Start: t0, End: t0.Add(time.Millisecond), Final: true, OK: true})
	// seq 1 never ran; seq 2 ran anyway.
	l.Handled(integration.Call{Session: "chat-1", Seq: 2, EventID: "id-2", Start: t0.Add(2 * time.Millisecond), End: t0.Add(3 * time.Millisecond), Final: true, OK: true})
	r := l.Report()
	fmt.Println(r.Violations, r.Lost)
	// Output: 1 1
}
