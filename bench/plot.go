package bench

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/selectformer/selectformer/transport"
)

// Plot file names written by WritePlots.
const (
	PlotDelayVsPool      = "delay_vs_pool.png"
	PlotDelayVsBandwidth = "delay_vs_bandwidth.png"
	PlotDelayVsLatency   = "delay_vs_latency.png"
)

// logSpace returns n points from lo to hi evenly spaced on a log scale.
func logSpace(lo, hi float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = lo * math.Pow(hi/lo, float64(i)/float64(n-1))
	}
	return out
}

func newLogPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text, p.Y.Label.Text = x, y
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	return p
}

func addLine(p *plot.Plot, i int, name string, xys plotter.XYs) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.Color = plotutil.Color(i)
	l.Dashes = plotutil.Dashes(i % 3)
	l.Width = vg.Points(1.5)
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

func addPoints(p *plot.Plot, name string, xys plotter.XYs, shape draw.GlyphDrawer, c color.Color) error {
	s, err := plotter.NewScatter(xys)
	if err != nil {
		return err
	}
	s.GlyphStyle.Shape, s.GlyphStyle.Color, s.GlyphStyle.Radius = shape, c, vg.Points(4)
	p.Add(s)
	if name != "" {
		p.Legend.Add(name, s)
	}
	return nil
}

// WritePlots draws the report's PNG plots into dir: the projected delay vs
// the pool size of each workload (QuickSelect modelled from its measured
// per-comparison cost and expected comparison count) with the paper's
// reported points; and the delay the bounds predict (BoundModelSeconds) vs
// the link's bandwidth and vs its round-trip time, with each run's projected
// point. It returns the files' names.
func WritePlots(dir string, reps []*SelectReport) ([]string, error) {
	if len(reps) == 0 {
		return nil, fmt.Errorf("bench: plots: no reports")
	}
	// Delay vs pool size.
	p := newLogPlot("Projected selection delay vs pool size", "pool size (candidates)", "delay (hours)")
	sizes := logSpace(1e3, 1e6, 25)
	paper := map[string]plotter.XYs{}
	var paperOrder []string
	for i, r := range reps {
		var xys plotter.XYs
		for _, n := range sizes {
			pr, err := r.Project(int(n))
			if err != nil {
				return nil, fmt.Errorf("bench: plots: %s at %d: %w", r.Workload.Name, int(n), err)
			}
			xys = append(xys, plotter.XY{X: n, Y: pr.Hours})
		}
		if err := addLine(p, i, fmt.Sprintf("ours: %s (%s)", r.Workload.Name, r.Projection.Link), xys); err != nil {
			return nil, err
		}
		if err := addPoints(p, "", plotter.XYs{{X: float64(r.Projection.Pool), Y: r.Projection.Hours}}, draw.CircleGlyph{}, plotutil.Color(i)); err != nil {
			return nil, err
		}
		for _, d := range r.Workload.Paper {
			kind, _, _ := strings.Cut(d.Label, ",")
			key := "paper: " + kind
			if _, ok := paper[key]; !ok {
				paperOrder = append(paperOrder, key)
			}
			dup := false
			for _, q := range paper[key] {
				dup = dup || (q.X == float64(d.Pool) && q.Y == d.Hours)
			}
			if !dup {
				paper[key] = append(paper[key], plotter.XY{X: float64(d.Pool), Y: d.Hours})
			}
		}
	}
	shapes := []draw.GlyphDrawer{draw.TriangleGlyph{}, draw.BoxGlyph{}, draw.CrossGlyph{}, draw.PyramidGlyph{}}
	for i, key := range paperOrder {
		if err := addPoints(p, key, paper[key], shapes[i%len(shapes)], color.Black); err != nil {
			return nil, err
		}
	}
	files := []string{PlotDelayVsPool}
	if err := p.Save(8*vg.Inch, 5.5*vg.Inch, filepath.Join(dir, PlotDelayVsPool)); err != nil {
		return nil, fmt.Errorf("bench: plots: %w", err)
	}
	// Delay vs bandwidth (at each run's latency) and vs RTT (at its bandwidth).
	base := func(r *SelectReport) transport.Profile {
		if l := r.linkProfile(); l != nil {
			return *l
		}
		return transport.PaperWAN
	}
	pb := newLogPlot("Delay vs link bandwidth (bound model; one-way latency as run)", "bandwidth per direction (MB/s)", "delay (hours)")
	pl := newLogPlot("Delay vs link round-trip time (bound model; bandwidth as run)", "round-trip time (ms)", "delay (hours)")
	pb.Legend.Left, pl.Legend.Left = false, true
	for i, r := range reps {
		b := base(r)
		var xb, xl plotter.XYs
		for _, mbps := range logSpace(10, 10000, 25) {
			l := b
			l.Bandwidth = int64(mbps * 1e6)
			xb = append(xb, plotter.XY{X: mbps, Y: BoundModelSeconds(r.Projection, l) / 3600})
		}
		for _, ms := range logSpace(1, 1000, 25) {
			l := b
			l.Latency = time.Duration(ms / 2 * float64(time.Millisecond))
			xl = append(xl, plotter.XY{X: ms, Y: BoundModelSeconds(r.Projection, l) / 3600})
		}
		name := r.Workload.Name
		if err := addLine(pb, i, name, xb); err != nil {
			return nil, err
		}
		if err := addLine(pl, i, name, xl); err != nil {
			return nil, err
		}
		if l := r.linkProfile(); l != nil && l.Bandwidth > 0 {
			pt := plotter.XYs{{X: float64(l.Bandwidth) / 1e6, Y: r.Projection.Hours}}
			if err := addPoints(pb, "", pt, draw.CircleGlyph{}, plotutil.Color(i)); err != nil {
				return nil, err
			}
			if l.Latency > 0 {
				pt = plotter.XYs{{X: 2 * l.Latency.Seconds() * 1000, Y: r.Projection.Hours}}
				if err := addPoints(pl, "", pt, draw.CircleGlyph{}, plotutil.Color(i)); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, f := range []struct {
		p    *plot.Plot
		name string
	}{{pb, PlotDelayVsBandwidth}, {pl, PlotDelayVsLatency}} {
		if err := f.p.Save(8*vg.Inch, 5.5*vg.Inch, filepath.Join(dir, f.name)); err != nil {
			return nil, fmt.Errorf("bench: plots: %w", err)
		}
		files = append(files, f.name)
	}
	return files, nil
}
