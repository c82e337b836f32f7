package party

import (
	"math"
	"testing"

	"github.com/selectformer/selectformer/bench/quality"
	"github.com/selectformer/selectformer/selection"
)

// TestDefaultScheduleIsQualitys: the binaries' default schedule is the one
// bench/QUALITY.md measures on MNIST (the quality tool's default for the
// examples' ViT): the same proxies phase by phase, and a first phase that
// keeps what the tool's keeps at its 20% budget with a 5% bootstrap
// (2.5 times the final selection: 0.15·2.5/0.95 ≈ 0.39 of the candidates).
func TestDefaultScheduleIsQualitys(t *testing.T) {
	sched, err := selection.ParseSchedule(DefaultSchedule)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := quality.Defaults(quality.MNIST, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(sched) != len(cfg.Schedule) {
		t.Fatalf("DefaultSchedule %q has %d phases, the quality tool's MNIST schedule %d", DefaultSchedule, len(sched), len(cfg.Schedule))
	}
	for i, ph := range sched {
		if ph.Proxy != cfg.Schedule[i].Proxy {
			t.Errorf("phase %d: DefaultSchedule's proxy %+v, the quality tool's %+v", i+1, ph.Proxy, cfg.Schedule[i].Proxy)
		}
	}
	keep := 0.15 * cfg.Schedule[0].Times / 0.95
	if math.Abs(sched[0].Keep-keep) > 0.02 {
		t.Errorf("DefaultSchedule's first phase keeps %.3f of the candidates, the quality tool's %.3f at a 20%% budget", sched[0].Keep, keep)
	}
}
