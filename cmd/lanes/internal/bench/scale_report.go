package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// scaleReport is a --scale run.
type scaleReport struct {
	Sessions   int           `json:"sessions"`
	Partitions int           `json:"partitions"`
	Work       time.Duration `json:"work_ns"`
	Pool       int           `json:"pool"`
	Window     time.Duration `json:"window_ns"`
	Where      string        `json:"where"`
	Steps      []ScaleStep   `json:"steps"`
}

func (r scaleReport) print(w io.Writer) {
	fmt.Fprintf(w, "lanes-lab bench --scale: one group grown through %s of member processes; %s, %s, "+
		"a %v call per message, at most %s at once per member; %s\n\n",
		cli.Count(len(r.Steps), "count"), cli.Count(r.Sessions, "session"), cli.Count(r.Partitions, "partition"), r.Work,
		cli.Count(r.Pool, "call"), r.Where)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "members\tmsg/s\t× one member\tpools allow\tof that\tsettle\toffered\thandled\tp50\tp99\t")
	for _, s := range r.Steps {
		fmt.Fprintf(tw, "%d\t%.0f\t%.2f\t%.0f\t%.2f\t%v\t%.0f\t%.0f\t%v\t%v\t\n", s.Members, s.Rate, s.Speedup, s.Bound, s.Rate/s.Bound,
			s.Settle.Round(10*time.Millisecond), s.Offered, s.OpenRate, s.P50.Round(100*time.Microsecond), s.P99.Round(100*time.Microsecond))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nmsg/s: a preloaded topic drained (the group's commits over the window); offered, handled, p50, p99: a second group on a topic sent to at 80 % of what the pools allow (record timestamp to handled)")
}

// plot writes scaling.png into dir: throughput against members, with
// what the members' pools allow.
func (r scaleReport) plot(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Scaling out: %s, %s, %v calls, %d at once per member", cli.Count(r.Sessions, "session"),
		cli.Count(r.Partitions, "partition"), r.Work, r.Pool)
	p.X.Label.Text = "member processes"
	p.Y.Label.Text = "messages per second"
	got, bound := make(plotter.XYs, len(r.Steps)), make(plotter.XYs, len(r.Steps))
	for i, s := range r.Steps {
		got[i] = plotter.XY{X: float64(s.Members), Y: s.Rate}
		bound[i] = plotter.XY{X: float64(s.Members), Y: s.Bound}
	}
	if err := plotutil.AddLinePoints(p, "lanes", got, "what the pools allow", bound); err != nil {
		return fmt.Errorf("plot scaling: %w", err)
	}
	if err := p.Save(16*vg.Centimeter, 11*vg.Centimeter, filepath.Join(dir, "scaling.png")); err != nil {
		return fmt.Errorf("plot scaling.png: %w", err)
	}
	q := plot.New()
	q.Title.Text = "Latency at 80 % of what the pools allow, record timestamp to handled"
	q.X.Label.Text = "member processes"
	q.Y.Label.Text = "milliseconds"
	p50, p99 := make(plotter.XYs, len(r.Steps)), make(plotter.XYs, len(r.Steps))
	for i, s := range r.Steps {
		p50[i] = plotter.XY{X: float64(s.Members), Y: float64(s.P50) / 1e6}
		p99[i] = plotter.XY{X: float64(s.Members), Y: float64(s.P99) / 1e6}
	}
	if err := plotutil.AddLinePoints(q, "p50", p50, "p99", p99); err != nil {
		return fmt.Errorf("plot scaling latency: %w", err)
	}
	if err := q.Save(16*vg.Centimeter, 11*vg.Centimeter, filepath.Join(dir, "scaling-latency.png")); err != nil {
		return fmt.Errorf("plot scaling-latency.png: %w", err)
	}
	return nil
}
