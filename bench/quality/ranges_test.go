package quality

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/proxy"
)

func TestRingBits(t *testing.T) {
	for _, c := range []struct {
		v    float64
		frac uint
		want int
	}{
		{1, 40, 42},
		{16.78, 40, 47},
		{16, 40, 46},
		{0.3, 32, 33},
		{135.9, 32, 42},
		{0, 32, -1},
		{math.Inf(1), 32, -1},
		{math.NaN(), 32, -1},
	} {
		if got := RingBits(c.v, c.frac); got != c.want {
			t.Errorf("RingBits(%v, %d) = %d, want %d", c.v, c.frac, got, c.want)
		}
	}
	if a, l := RangesFracBits(16); a != 40 || l != 32 {
		t.Errorf("fractional bits at f = 16: attention %d, layernorm %d; want 40, 32", a, l)
	}
}

// TestRangesSmall measures the value ranges of the small setting's proxies
// (MNIST, both generations) and checks what is structural: a measurement
// per phase and layer, the folded attention's exactly where the proxy
// emulates the softmax, finite positive maxima, and a table row for each.
func TestRangesSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("generates two proxy schedules (about 10 s)")
	}
	cfg, err := Defaults(MNIST, false, true)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := Prepare(cfg.Setting, cfg.Logger)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Ranges(context.Background(), d, cfg, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Variants) != 2 || r.Pool != d.Pool.Len() {
		t.Fatalf("%d variants over %d samples", len(r.Variants), r.Pool)
	}
	pos := func(what string, m proxy.Max) {
		if !(m.All > 0) || math.IsInf(m.All, 0) || m.Unpadded > m.All {
			t.Errorf("%s: %+v", what, m)
		}
	}
	for _, v := range r.Variants {
		if len(v.Ranges) != len(cfg.Schedule) {
			t.Fatalf("%s: %d phases measured", v.Method, len(v.Ranges))
		}
		for i, rg := range v.Ranges {
			p := v.Proxies[i]
			if rg.Samples != d.Pool.Len() || len(rg.Layers) != p.Shape.Layers || rg.FinalLN == nil {
				t.Fatalf("%s phase %d: %d samples, %d layers, final %v", v.Method, i, rg.Samples, len(rg.Layers), rg.FinalLN)
			}
			for li, l := range rg.Layers {
				if (l.Heads != nil) != (p.AttnMLP[li] != nil) || (l.Heads != nil && len(l.Heads) != p.Shape.Heads) {
					t.Errorf("%s phase %d layer %d: %d heads measured", v.Method, i, li, len(l.Heads))
				}
				if l.Heads != nil {
					a := l.Attention()
					pos("q·Gᵀ", a.Product)
					pos("h·N", a.HN)
					pos("P·V", a.Context)
				}
				pos("(x−μ)²", l.LN.Square)
				pos("(x−μ)·r·γ", l.LN.Product)
			}
		}
	}
	if v := r.Variants[1]; v.Method != OursMLP || v.Ranges[len(v.Ranges)-1].Layers[0].Heads == nil {
		t.Errorf("all-MLP variant %q without its last phase's attention", v.Method)
	}
	md := r.Markdown()
	for _, s := range []string{"q_h·G_hᵀ", "(x − μ)·r·γ", "final LayerNorm: Σ(x − μ)²", "phase 2"} {
		if !strings.Contains(md, s) {
			t.Errorf("table lacks %q:\n%s", s, md)
		}
	}
}
