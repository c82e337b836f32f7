package ot

import (
	"strings"
	"testing"

	"github.com/selectformer/selectformer/beaver/he"
)

// TestHEProviderRefusesInsecureParams: a lattice weight-mask generator is
// not made with parameters below 128-bit security or with a short flood
// (LatticeOptions.Params; he.NewScheme's checks), so neither party's
// provider can run on them.
func TestHEProviderRefusesInsecureParams(t *testing.T) {
	cases := []struct {
		name   string
		change func(*he.Params)
		want   string
	}{
		{"LogN 12 with a 216-bit Q", func(p *he.Params) {
			p.LogN, p.FloodBits = 12, 77
			p.Q = []uint64{0x3fffffffef8001, 0x3fffffffeb8001, 0x3fffffffe7c001, 0x3fffffffe64001}
		}, "HE standard"},
		{"σ = 0.01", func(p *he.Params) { p.Sigma = 0.01 }, "σ"},
		{"FloodBits 0", func(p *he.Params) { p.FloodBits = 0 }, "no flood"},
		{"FloodBits 77", func(p *he.Params) { p.FloodBits = 77 }, "statistical distance"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := he.DefaultParams()
			c.change(&p)
			_, err := NewLattice(LatticeOptions{Params: &p})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v, want a refusal naming %q", err, c.want)
			}
		})
	}
}
