package dealer

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/beavertest"
)

// mangler is a provider wrapper whose Material answers are altered by f: a
// provider that returns material of the wrong shape.
type mangler struct {
	beaver.Provider
	f func(m beaver.Material) beaver.Material
}

// Unwrap implements beaver.Wrapper.
func (m mangler) Unwrap() beaver.Provider { return m.Provider }

func (w mangler) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	m, err := w.Provider.Material(ctx, r)
	if err != nil {
		return m, err
	}
	return w.f(m), nil
}

// WeightMask alters the mask as the single part of a Material.
func (w mangler) WeightMask(ctx context.Context, id uint64, k, n int) ([]uint64, error) {
	b, err := w.Provider.WeightMask(ctx, id, k, n)
	if err != nil {
		return b, err
	}
	if m := w.f(beaver.Material{Parts: [][]uint64{b}}); len(m.Parts) > 0 {
		return m.Parts[0], nil
	}
	return nil, nil
}

// TestTypedRefusesMalformedMaterial: a provider that answers with the wrong
// kind, the wrong number of parts or parts of the wrong length gets an error
// from the typed helpers, not a panic or a short slice handed to a protocol.
func TestTypedRefusesMalformedMaterial(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		party int
		f     func(beaver.Material) beaver.Material
		call  func(beaver.Typed) error
	}{
		{"wrong kind", 0, func(m beaver.Material) beaver.Material { m.Kind = beaver.KindSquare; return m },
			func(p beaver.Typed) error { _, err := p.Triples(ctx, 1, 4); return err }},
		{"missing part", 0, func(m beaver.Material) beaver.Material { m.Parts = m.Parts[:2]; return m },
			func(p beaver.Typed) error { _, err := p.Triples(ctx, 1, 4); return err }},
		{"extra part", 1, func(m beaver.Material) beaver.Material { m.Parts = append(m.Parts, nil); return m },
			func(p beaver.Typed) error { _, err := p.SquarePairs(ctx, 1, 4); return err }},
		{"short part", 1, func(m beaver.Material) beaver.Material { m.Parts[2] = m.Parts[2][:3]; return m },
			func(p beaver.Typed) error { _, err := p.MatTriples(ctx, 1, 1, 2, 2, 2); return err }},
		{"party 0 given a weight triple's A", 0, func(m beaver.Material) beaver.Material { m.Parts[0] = make([]uint64, 4); return m },
			func(p beaver.Typed) error { _, err := p.WeightTriple(ctx, 1, 3, 2, 2, 2); return err }},
		{"short bit pair packing", 1, func(m beaver.Material) beaver.Material { m.Parts[0] = nil; return m },
			func(p beaver.Typed) error { _, err := p.BitPairs(ctx, 1, 65); return err }},
		{"no weight mask", 0, func(m beaver.Material) beaver.Material { m.Parts = nil; return m },
			func(p beaver.Typed) error { _, err := p.WeightMask(ctx, 3, 2, 2); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := New()
			if err != nil {
				t.Fatal(err)
			}
			p, _ := d.Provider(tc.party)
			if err := tc.call(beaver.Typed{Provider: p}); err != nil {
				t.Fatalf("well-formed material refused: %v", err)
			}
			err = tc.call(beaver.Typed{Provider: mangler{p, tc.f}})
			if err == nil || !strings.Contains(err.Error(), "mangler") {
				t.Fatalf("malformed material: %v", err)
			}
		})
	}
}

// TestMaterialRequests: the one request method's contract — the caller
// leaves the counter to the provider, and a weight mask is keyed by id
// alone, party 0's, positionless, and never asked of the dealer.
func TestMaterialRequests(t *testing.T) {
	ctx := context.Background()
	s0, s1 := beavertest.Seeds(40)
	d := NewWithSeeds(s0, s1)
	p0, _ := d.Provider(0)
	p1, _ := d.Provider(1)
	refused := []struct {
		name string
		p    beaver.Provider
		r    beaver.Request
		want string
	}{
		{"counter given", p0, beaver.Request{Kind: beaver.KindTriple, Stream: 1, Counter: 3, N: 2}, "counter"},
		{"unknown kind", p0, beaver.Request{Kind: beaver.Kind(255), N: 1}, "unknown kind"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.p.Material(ctx, tc.r); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		p    beaver.Provider
		k    int
		want string
	}{
		{"weight mask of party 1", p1, 3, "only the model owner"},
		{"negative weight mask", p0, -3, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.p.WeightMask(ctx, 5, tc.k, 4); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}

	m, err := p0.WeightMask(ctx, 5, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 3*4 {
		t.Fatalf("mask of %d words", len(m))
	}
	again, err := beaver.Typed{Provider: p0}.WeightMask(ctx, 5, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m, again) {
		t.Fatal("two requests for weight 5 gave different masks")
	}
	if other, _ := (beaver.Typed{Provider: p0}).WeightMask(ctx, 6, 3, 4); slices.Equal(other, again) {
		t.Fatal("weights 5 and 6 share a mask")
	}
	if pos, st := p0.Position(0), p0.Stats(); pos != 0 || st.Items != 0 {
		t.Fatalf("weight masks moved stream 0 to %d or counted %d items", pos, st.Items)
	}

	// The dealer never serves a weight mask, neither over the wire nor in
	// process: kind 10, the weight mask's when it was a request kind, is
	// no kind.
	mask := beaver.Request{Kind: 10, WeightID: 5, K: 3, N: 4}
	b, err := mask.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := beaver.DecodeRequest(b); err == nil || !strings.Contains(err.Error(), "unknown kind") {
		t.Fatalf("decoded a weight mask request: %v", err)
	}
	if _, err := d.core.serve(d.core.defaultSession(), 1, mask); err == nil || !strings.Contains(err.Error(), "unknown kind") {
		t.Fatalf("dealer served a weight mask: %v", err)
	}
}

// TestProviderDescribe: the in-process dealer's providers and a networked
// dealer's client (the same seeded provider) describe themselves as
// "dealer", the -provider name selection's hello compares.
func TestProviderDescribe(t *testing.T) {
	d := NewWithSeeds(share.Seed{1}, share.Seed{2})
	for party := range 2 {
		p, err := d.Provider(party)
		if err != nil {
			t.Fatal(err)
		}
		if got := beaver.Describe(p); got != (beaver.Description{Source: "dealer"}) {
			t.Errorf("party %d: %+v", party, got)
		}
	}
}
