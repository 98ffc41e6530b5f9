package consumer

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestMissingTopics: a consumed topic and the dead-letter topic that do
// not exist when Run starts are named at once, in the log and in readyz;
// each reason clears once its topic is created.
func TestMissingTopics(t *testing.T) {
	e := newEnv(t, 1, "chats") // no "orders", no "dlq"
	logs := newLogCapture()
	cfg := e.config("g-missing", "chats", "orders")
	cfg.Logger = &logs.log
	c, err := New(cfg, nopHandler())
	if err != nil {
		t.Fatal(err)
	}
	p := newProbe(t, c)
	start(t, c)
	p.awaitReadyz("both missing topics named", testTimeout,
		notReadyWith("consumed topics missing since ", "[orders]", "dead-letter topic missing since ", "[dlq]"))
	for _, topic := range []string{"orders", "dlq"} {
		found := false
		for _, l := range logs.lines("missing") {
			found = found || l["level"] == "warn" && containsStr(l["topics"], topic)
		}
		if !found {
			t.Fatalf("no warning naming the missing topic %s:\n%s", topic, logs)
		}
	}

	adm := kadm.NewClient(e.client())
	if _, err := adm.CreateTopics(context.Background(), 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	body := p.awaitReadyz("only the dead-letter topic missing", testTimeout, func(code int, body string) bool {
		return notReadyWith("dead-letter topic missing")(code, body) && !strings.Contains(body, "consumed topics missing")
	})
	if strings.Contains(body, "orders") {
		t.Fatalf("readyz still names orders after it was created: %q", body)
	}
	if _, err := adm.CreateTopics(context.Background(), 1, 1, nil, "dlq"); err != nil {
		t.Fatal(err)
	}
	p.awaitReadyz("ready", testTimeout, ready)
	if found := logs.lines("topics found"); len(found) < 2 {
		t.Fatalf("want an info line for each topic found, got %v\n%s", found, logs)
	}
}
