package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/bench/quality"
	"github.com/selectformer/selectformer/proxy"
)

func TestParseBudgets(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []float64
		ok   bool
	}{
		{"20,30,40", []float64{0.2, 0.3, 0.4}, true},
		{" 25 ", []float64{0.25}, true},
		{"0", nil, false},
		{"100", nil, false},
		{"20,x", nil, false},
	} {
		got, err := parseBudgets(c.in)
		if (err == nil) != c.ok || (c.ok && !slices.Equal(got, c.want)) {
			t.Errorf("parseBudgets(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestParseSchedule(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []quality.Shape
		ok   bool
	}{
		{"2:4:16", []quality.Shape{{Proxy: proxy.Shape{Layers: 2, Heads: 4, MLPHidden: 16}}}, true},
		{"2:4:8x2.5, 2:4:16", []quality.Shape{{Proxy: proxy.Shape{Layers: 2, Heads: 4, MLPHidden: 8}, Times: 2.5}, {Proxy: proxy.Shape{Layers: 2, Heads: 4, MLPHidden: 16}}}, true},
		{"1:4:8×4,2:4:16", []quality.Shape{{Proxy: proxy.Shape{Layers: 1, Heads: 4, MLPHidden: 8}, Times: 4}, {Proxy: proxy.Shape{Layers: 2, Heads: 4, MLPHidden: 16}}}, true},
		{"2:4:16x2", nil, false},
		{"1:4:8,2:4:16", nil, false},
		{"1:4:8x0.5,2:4:16", nil, false},
		{"1:4x2,2:4:16", nil, false},
		{"0:4:8x2,2:4:16", nil, false},
		{"1:4:8junkx2,2:4:16", nil, false},
	} {
		got, err := parseSchedule(c.in)
		if (err == nil) != c.ok || (c.ok && !slices.Equal(got, c.want)) {
			t.Errorf("parseSchedule(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

// TestRunRejects checks that bad flags fail before any data is loaded.
func TestRunRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown data set", []string{"--dataset", "cifar"}, "unknown data set"},
		{"unknown method", []string{"--methods", "Random,Best"}, `unknown method "Best"`},
		{"bad budget", []string{"--budgets", "120"}, "not a percentage"},
		{"stray argument", []string{"extra"}, "unexpected arguments"},
		{"bad schedule", []string{"--schedule", "2:4:16x2"}, "flag -schedule"},
		{"bad eras", []string{"--eras", "1790,x"}, "flag -eras"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errs bytes.Buffer
			err := run(context.Background(), c.args, &out, &errs)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("run(%q) = %v, want an error containing %q", c.args, err, c.want)
			}
		})
	}
}

// TestOverridesApply: each flag of a setting replaces the data set's
// default only when given (--per-class, wordnet's draw per class, among
// them).
func TestOverridesApply(t *testing.T) {
	s := quality.Setting{Public: 500, Pool: 4000, PerClass: 2200, TestPerClass: 200}
	overrides{}.apply(&s)
	if s.Public != 500 || s.Pool != 4000 || s.PerClass != 2200 || s.TestPerClass != 200 || s.Replay {
		t.Fatalf("no flags changed the setting: %+v", s)
	}
	overrides{public: 300, pool: 1000, perClass: 900, replay: true}.apply(&s)
	if s.Public != 300 || s.Pool != 1000 || s.PerClass != 900 || s.TestPerClass != 200 || !s.Replay {
		t.Fatalf("flags public 300, pool 1000, per-class 900, replay: %+v", s)
	}
}
