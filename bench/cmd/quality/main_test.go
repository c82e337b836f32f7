package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
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
