package protocol

import (
	"math/rand"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// TestSignCircuitStepsInTheClear runs the sign circuit's steps (leafOperands,
// leafCarries, carryLevelOperands, combineCarryLevel, msbFromCarry) for both
// parties with the ANDs done by an ideal functionality in the clear (random
// XOR shares of the product), and checks the result against msb / bit 31 of
// x0 + x1 computed directly.
func TestSignCircuitStepsInTheClear(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for _, tc := range []struct{ n, width int }{{1, 64}, {63, 64}, {64, 64}, {130, 64}, {1, 32}, {100, 32}} {
		x0 := make([]uint64, tc.n)
		x1 := make([]uint64, tc.n)
		for i := range x0 {
			x0[i], x1[i] = rng.Uint64(), rng.Uint64()
		}
		// Edge values: sums at and around the sign boundaries.
		if tc.n > 4 {
			x0[0], x1[0] = 1<<63-1, 1
			x0[1], x1[1] = 1<<31-1, 1
			x0[2], x1[2] = 0, 0
			x0[3], x1[3] = ^uint64(0), 1
		}
		w := share.PackedWords(tc.n)
		// andShares is the ideal AND: party 0 gets r, party 1 gets (a0⊕a1)(b0⊕b1)⊕r.
		andShares := func(a0, a1, b0, b1 []uint64) ([]uint64, []uint64) {
			z0, z1 := make([]uint64, len(a0)), make([]uint64, len(a0))
			for k := range a0 {
				r := rng.Uint64()
				z0[k], z1[k] = r, (a0[k]^a1[k])&(b0[k]^b1[k])^r
			}
			return z0, z1
		}
		pl0, pl1 := bitSlice(x0), bitSlice(x1)
		sh := signCircuit(tc.width)
		leaves := sh.leaves
		op0, loc0 := leafOperands(0, pl0, w, sh)
		op1, loc1 := leafOperands(1, pl1, w, sh)
		// Cross AND: party 0's clear bits times party 1's clear bits.
		zero := make([]uint64, len(op0))
		z0, z1 := andShares(op0, zero, op1, zero)
		gs0, ps0 := leafCarries(z0, loc0, w, leaves)
		gs1, ps1 := leafCarries(z1, loc1, w, leaves)
		for _, ands := range sh.ands {
			xs0, ys0 := carryLevelOperands(gs0, ps0, w, ands)
			xs1, ys1 := carryLevelOperands(gs1, ps1, w, ands)
			zz0, zz1 := andShares(xs0, xs1, ys0, ys1)
			gs0, ps0 = combineCarryLevel(zz0, gs0, ps0, w)
			gs1, ps1 = combineCarryLevel(zz1, gs1, ps1, w)
		}
		if len(gs0) != 1 || len(gs1) != 1 {
			t.Fatalf("width %d: the layout's %d levels leave %d nodes, want 1", tc.width, len(sh.ands), len(gs0))
		}
		m0 := msbFromCarry(bitPlane(pl0, w, tc.width-1), gs0[0])
		m1 := msbFromCarry(bitPlane(pl1, w, tc.width-1), gs1[0])
		for i := 0; i < tc.n; i++ {
			want := (x0[i] + x1[i]) >> 63
			if tc.width == 32 {
				want = uint64(uint32(x0[i])+uint32(x1[i])) >> 31
			}
			got := (m0[i>>6] ^ m1[i>>6]) >> (uint(i) & 63) & 1
			if got != want {
				t.Fatalf("n=%d width=%d element %d: msb share XOR = %d, want %d", tc.n, tc.width, i, got, want)
			}
		}
	}
}

// TestCarryLevelOperandsChecksTheLayout checks that a level whose nodes call
// for another AND count than the layout's panics instead of sending a message
// of another size than the cost table's.
func TestCarryLevelOperandsChecksTheLayout(t *testing.T) {
	w := 1
	gs := [][]uint64{{0}, {0}, {0}, {0}}
	ps := [][]uint64{nil, {0}, {0}, {0}} // two pairs, the lowest without P: 3 ANDs
	if xs, ys := carryLevelOperands(gs, ps, w, 3); len(xs) != 3 || len(ys) != 3 {
		t.Fatalf("3 ANDs: %d and %d words, want 3", len(xs), len(ys))
	}
	defer func() {
		if recover() == nil {
			t.Fatal("carryLevelOperands with 2 ANDs for 3 did not panic")
		}
	}()
	carryLevelOperands(gs, ps, w, 2)
}
