package quality

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/share"
)

// The proxies' value ranges (bench/TWOHOSTS.md, step 18): the largest
// magnitudes the secure products of the proxies this tool trains reach in
// plaintext (proxy.Proxy.ValueRanges) over the pool, and the ring width ℓ
// each product would need.

// RangesVariant is one generation whose proxies' value ranges are measured.
type RangesVariant struct {
	// Method names the generation (Ours or Ours (all MLPs)).
	Method string
	// Proxies are its proxies, one per phase of the main schedule.
	Proxies []*proxy.Proxy
	// Ranges holds each proxy's maxima over the pool.
	Ranges []*proxy.Ranges
}

// RangesResult is what Ranges measured.
type RangesResult struct {
	// Dataset and Seed say which data and which seed's bootstrap.
	Dataset string
	Seed    int
	// Pool is the number of samples the maxima are over (the whole pool,
	// bootstrap included).
	Pool int
	// Variants holds each measured generation.
	Variants []RangesVariant
}

// Ranges generates the main schedule's proxies of the seed with index s as
// the tool's "Ours" plaintext path does (the library's default generation
// on a random bootstrap at the first budget; with allMLP, also "Ours (all
// MLPs)", whose last phase emulates the softmax too) and records their
// value ranges over the pool.
func Ranges(ctx context.Context, d *Data, cfg Config, s int, allMLP bool) (*RangesResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(cfg.Budgets) == 0 || len(cfg.Schedule) == 0 {
		return nil, fmt.Errorf("quality ranges: no budget or schedule")
	}
	if cfg.Logger == nil {
		return nil, fmt.Errorf("quality ranges: no logger")
	}
	cfg.SecureSeeds = 0 // a random bootstrap, no MPC run
	e := newSeedEval(d, &cfg, s)
	nb, _ := cfg.sizes(e.n, cfg.Budgets[0])
	gens := seedConfigs(&cfg, d, e.seed, nb)
	if _, _, err := e.bootstrap(ctx, gens.ours); err != nil {
		return nil, fmt.Errorf("quality ranges: %w", err)
	}
	out := &RangesResult{Dataset: d.Setting.Dataset, Seed: s + 1, Pool: d.Pool.Len()}
	todo := []struct {
		method string
		gen    proxy.Config
	}{{Ours, gens.ours}}
	if allMLP && finalExact(gens.resolved) {
		todo = append(todo, struct {
			method string
			gen    proxy.Config
		}{OursMLP, gens.allMLP})
	}
	for _, t := range todo {
		r, err := e.generate(ctx, t.gen, phasesOf(cfg.Schedule))
		if err != nil {
			return nil, fmt.Errorf("quality ranges: %s: %w", t.method, err)
		}
		v := RangesVariant{Method: t.method, Proxies: r.Proxies}
		for i, p := range r.Proxies {
			rg, err := p.ValueRanges(d.Pool, 256)
			if err != nil {
				return nil, fmt.Errorf("quality ranges: %s phase %d: %w", t.method, i+1, err)
			}
			v.Ranges = append(v.Ranges, rg)
		}
		out.Variants = append(out.Variants, v)
	}
	return out, nil
}

// RangesFracBits returns the fractional bits the secure path's products
// carry before their truncation at f fractional bits: the folded
// attention's q_h·G_hᵀ and h·N, 2f + secure.FoldExtraBits(f) (40 at f =
// 16), and the LayerNorm's (x − μ)², Σ(x − μ)² and (x − μ)·r·γ, 2f.
func RangesFracBits(f uint) (attention, layerNorm uint) {
	return 2*f + secure.FoldExtraBits(f), 2 * f
}

// RingBits is the ring width ℓ a product of largest magnitude v with frac
// fractional bits needs to lie in [−2^(ℓ−2), 2^(ℓ−2)): ⌈log2 v⌉ + frac + 2;
// −1 for a v that is not positive and finite.
func RingBits(v float64, frac uint) int {
	if !(v > 0) || math.IsInf(v, 0) {
		return -1
	}
	return int(math.Ceil(math.Log2(v))) + int(frac) + 2
}

// Markdown writes the maxima as a table per generation and phase, with the
// ring width ℓ of every product at the default fixed point
// (share.DefaultFixedPoint).
func (r *RangesResult) Markdown() string {
	var b strings.Builder
	fa, fl := RangesFracBits(share.DefaultFixedPoint.FracBits)
	fmt.Fprintf(&b, "Data set %s, seed %d's bootstrap, maxima over the pool's %d samples (bootstrap included). "+
		"ℓ = ⌈log2 max⌉ + fractional bits + 2, on the maximum over every row the secure path computes; "+
		"the attention's products carry %d fractional bits, the LayerNorm's %d (f = %d).\n",
		r.Dataset, r.Seed, r.Pool, fa, fl, share.DefaultFixedPoint.FracBits)
	row := func(name string, m proxy.Max, frac uint, product bool) {
		l := "—"
		if product {
			l = fmt.Sprint(RingBits(m.All, frac))
		}
		fmt.Fprintf(&b, "| %s | %.4g | %.4g | %s |\n", name, m.All, m.Unpadded, l)
	}
	for _, v := range r.Variants {
		for i, rg := range v.Ranges {
			sh := v.Proxies[i].Shape
			fmt.Fprintf(&b, "\n**%s, phase %d ⟨%d, %d, %d⟩** (ablation %+v)\n\n", v.Method, i+1, sh.Layers, sh.Heads, sh.MLPHidden, v.Proxies[i].Ablation)
			b.WriteString("| value | max, every row | max, unpadded rows | ℓ |\n|---|---:|---:|---:|\n")
			for li, l := range rg.Layers {
				if l.Heads != nil {
					a := l.Attention()
					pre := make([]string, len(l.Heads))
					for h, hr := range l.Heads {
						pre[h] = fmt.Sprintf("%.3g", hr.Pre.All)
					}
					row(fmt.Sprintf("layer %d: q_h·G_hᵀ = s·W1", li), a.Product, fa, true)
					row(fmt.Sprintf("layer %d: pre-activation s·W1 + b1 + fill (per head: %s)", li, strings.Join(pre, ", ")), a.Pre, fa, true)
					row(fmt.Sprintf("layer %d: h = ReLU(pre)", li), a.Hidden, fa, false)
					row(fmt.Sprintf("layer %d: h·N[:d]", li), a.HN, fa, true)
					row(fmt.Sprintf("layer %d: P·V = h·N[:d] + N[d]", li), a.Context, fa, true)
				}
				lnRows(row, fmt.Sprintf("layer %d LayerNorm", li), l.LN, fl)
			}
			if rg.FinalLN != nil {
				lnRows(row, "final LayerNorm", *rg.FinalLN, fl)
			}
		}
	}
	return b.String()
}

func lnRows(row func(string, proxy.Max, uint, bool), name string, l proxy.LayerNormRanges, frac uint) {
	prod := "(x − μ)·r·γ"
	if !l.Emulated {
		name += " (exact 1/√)"
		prod = "(x − μ)·r"
	}
	row(name+": x − μ", l.Centred, frac, false)
	row(name+": (x − μ)²", l.Square, frac, true)
	row(name+": Σ(x − μ)²", l.SumSquares, frac, true)
	row(name+": variance", l.Var, frac, false)
	row(name+": r", l.R, frac, false)
	row(name+": r·γ", l.RGamma, frac, false)
	row(name+": "+prod, l.Product, frac, true)
}
