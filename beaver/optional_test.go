package beaver

import "testing"

// base is a provider with optional behaviour (its other methods are never
// called here).
type base struct {
	Provider
	released [][2]uint64
}

func (b *base) ReleaseWeights(lo, hi uint64) { b.released = append(b.released, [2]uint64{lo, hi}) }

// layer is a wrapper that hides nothing but does not forward ReleaseWeights.
type layer struct{ Provider }

func (l layer) Unwrap() Provider { return l.Provider }

// loop is a broken wrapper that wraps itself.
type loop struct{ Provider }

func (l *loop) Unwrap() Provider { return l }

// TestAs: As finds optional behaviour and concrete providers through any
// number of wrappers (Typed among them), the outermost match first, and
// reports false where nothing in the chain has it, a cycle included.
func TestAs(t *testing.T) {
	b := &base{}
	chain := Typed{Provider: layer{layer{b}}}
	wr, ok := As[WeightReleaser](chain)
	if !ok {
		t.Fatal("WeightReleaser not found through two layers and Typed")
	}
	wr.ReleaseWeights(1, 2)
	if len(b.released) != 1 {
		t.Fatalf("released %v", b.released)
	}
	if got, ok := As[*base](chain); !ok || got != b {
		t.Fatalf("As[*base] = %v, %v", got, ok)
	}
	if got, ok := As[layer](chain); !ok || got.Provider != Provider(layer{b}) {
		t.Fatalf("As[layer] = %v, %v: want the outermost layer", got, ok)
	}
	if _, ok := As[SessionBudgeter](chain); ok {
		t.Fatal("found a SessionBudgeter nobody implements")
	}
	if _, ok := As[WeightReleaser](layer{}); ok {
		t.Fatal("found a WeightReleaser behind a nil provider")
	}
	if _, ok := As[WeightReleaser](&loop{}); ok {
		t.Fatal("found a WeightReleaser in a cycle")
	}
}
