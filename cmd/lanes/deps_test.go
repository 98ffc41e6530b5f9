package main

import (
	"os/exec"
	"strings"
	"testing"
)

// heavy are the packages only lanes-lab builds (the demo's and the bench's
// dependencies): lanes, which an operator installs, must build none of them.
var heavy = []string{
	"github.com/lanesdev/lanes/cmd/lanes/internal/demo", "github.com/lanesdev/lanes/cmd/lanes/internal/bench",
	"gonum.org/v1/plot", "codeberg.org/go-fonts", "github.com/jackc/pgx", "github.com/redis/go-redis",
	"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "github.com/prometheus",
}

// TestLeanDeps: the lanes command builds none of the demo's and the
// bench's packages (go list -deps), so that installing it neither
// downloads nor builds them.
func TestLeanDeps(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	pkgs := strings.Fields(string(out))
	for _, p := range pkgs {
		for _, h := range heavy {
			if p == h || strings.HasPrefix(p, h+"/") {
				t.Errorf("lanes builds %s, a package only lanes-lab should", p)
			}
		}
	}
	t.Logf("lanes builds %d packages", len(pkgs))
}
