package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lanesdev/lanes/cmd/lanes/internal/cli"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotFile is a written plot: its file name and what it shows.
type plotFile struct {
	Name, Title string
}

// plot writes the run's plots into dir: throughput against handler work
// per consumer (closed mode, uniform keys), and a latency CDF per consumer
// for every workload.
func (r *benchReport) plot(dir string) ([]plotFile, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plots: %w", err)
	}
	var out []plotFile
	if p, title := r.throughputPlot(); p != nil {
		f := plotFile{"throughput.png", title}
		if err := p.Save(16*vg.Centimeter, 11*vg.Centimeter, filepath.Join(dir, f.Name)); err != nil {
			return out, fmt.Errorf("plot %s: %w", f.Name, err)
		}
		out = append(out, f)
	}
	for i, w := range r.Workloads {
		p := r.latencyPlot(w)
		if p == nil {
			continue
		}
		f := plotFile{fmt.Sprintf("latency-%d-%s.png", i+1, slug(w.Name)), "Latency CDF: " + w.Name}
		if err := p.Save(16*vg.Centimeter, 11*vg.Centimeter, filepath.Join(dir, f.Name)); err != nil {
			return out, fmt.Errorf("plot %s: %w", f.Name, err)
		}
		out = append(out, f)
	}
	return out, nil
}

func slug(s string) string {
	return strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(strings.ReplaceAll(s, "µ", "u"))), "-")
}

// curve is the closed-mode, uniform, failure-free workloads with the most
// common session count, by work.
func (r *benchReport) curve() []workload {
	count := map[int]int{}
	var ws []workload
	for _, w := range r.Workloads {
		if w.Mode == "closed" && w.Zipf == 0 && w.Transient == 0 {
			ws = append(ws, w)
			count[w.Sessions]++
		}
	}
	best := 0
	for s, n := range count {
		if n > count[best] || n == count[best] && s > best {
			best = s
		}
	}
	ws = slices.DeleteFunc(ws, func(w workload) bool { return w.Sessions != best })
	slices.SortStableFunc(ws, func(a, b workload) int { return int(a.Work - b.Work) })
	return ws
}

func (r *benchReport) throughputPlot() (*plot.Plot, string) {
	ws := r.curve()
	if len(ws) < 2 {
		return nil, ""
	}
	p := plot.New()
	title := fmt.Sprintf("Throughput against handler work (%s, closed mode)", cli.Count(ws[0].Sessions, "session"))
	p.Title.Text = title
	p.X.Label.Text = "handler work per message"
	p.Y.Label.Text = "msgs/s (steady)"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{}
	labels := make([]string, len(ws))
	for i, w := range ws {
		labels[i] = w.Work.String()
	}
	p.NominalX(labels...)
	var args []any
	for _, name := range append(slices.Clone(allConsumers), "bound") {
		var xys plotter.XYs
		for i, w := range ws {
			y := 0.0
			if name == "bound" {
				y = r.bound(w.Name)
			} else if x := r.find(w.Name, name); x != nil {
				y = x.Steady
			}
			if y > 0 {
				xys = append(xys, plotter.XY{X: float64(i), Y: y})
			}
		}
		if len(xys) > 0 {
			args = append(args, name, xys)
		}
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return nil, ""
	}
	p.Legend.Top = true
	return p, title
}

// bound is a workload's bound (the same in each of its results).
func (r *benchReport) bound(workload string) float64 {
	for _, x := range r.Results {
		if x.Workload == workload {
			return x.Bound
		}
	}
	return 0
}

func (r *benchReport) latencyPlot(w workload) *plot.Plot {
	p := plot.New()
	p.Title.Text = "Latency CDF: " + w.Name
	p.X.Label.Text = "latency (ms, log)"
	if w.Mode == "closed" {
		p.X.Label.Text = "time from the run's start to handled (ms, log)"
	} else {
		p.X.Label.Text = "intended send to handled (ms, log)"
	}
	p.Y.Label.Text = "fraction of messages"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	var args []any
	for _, x := range r.Results {
		if x.Workload != w.Name || len(x.cdf) == 0 {
			continue
		}
		var xys plotter.XYs
		for i, d := range x.cdf {
			if d > 0 {
				xys = append(xys, plotter.XY{X: float64(d) / 1e6, Y: float64(i) / float64(len(x.cdf)-1)})
			}
		}
		if len(xys) > 1 {
			args = append(args, x.Consumer, xys)
		}
	}
	if len(args) == 0 || plotutil.AddLines(p, args...) != nil {
		return nil
	}
	p.Legend.Top, p.Legend.Left = true, true
	return p
}
