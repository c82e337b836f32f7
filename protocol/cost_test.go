package protocol

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// TestMessageBytes checks MessageBytes against what a session's exchange
// sends, for one frame and for several (the multi-frame ones carry the
// total length), and against the test's own framing (wireBytes).
func TestMessageBytes(t *testing.T) {
	for _, words := range []int{0, 1, 1000, transport.DefaultMaxFrame / 8, transport.DefaultMaxFrame/8 + 1, 3 * transport.DefaultMaxFrame / 8} {
		r := runPair(t, func(ctx context.Context, s *Session) (struct{}, error) {
			w, in := make([]uint64, words), make([]uint64, words) // apart: the send may still read w while the receive fills in
			return struct{}{}, s.Exchange(ctx, w, in)
		})
		want := MessageBytes(words)
		if want != wireBytes(words) {
			t.Errorf("%d words: MessageBytes %d, wireBytes %d", words, want, wireBytes(words))
		}
		wantCost(t, r, [2]int64{1, 1}, [2]int64{want, want})
	}
}

// TestCostFunctions checks the exported costs against the measured traffic
// of their protocols (and against the tests' own formulas, msbWire and
// truncReLUWire), for sizes around a word of bits and one whose first
// message spans several frames.
func TestCostFunctions(t *testing.T) {
	if got := SignCircuitWords(64); !slices.Equal(got, []int{156, 62, 30, 14, 6, 2}) {
		t.Fatalf("SignCircuitWords(64) = %v", got)
	}
	if got := SignCircuitWords(32); !slices.Equal(got, []int{76, 30, 14, 6, 2}) {
		t.Fatalf("SignCircuitWords(32) = %v", got)
	}
	SignCircuitWords(64)[0] = 0 // a copy: the table stays
	if SignCircuitWords(64)[0] != 156 {
		t.Fatal("SignCircuitWords returned the table itself")
	}
	if MSBCost(0) != (Cost{}) || TruncReLUCost(0) != (Cost{}) {
		t.Fatalf("empty: MSBCost %v, TruncReLUCost %v, want zero", MSBCost(0), TruncReLUCost(0))
	}
	for _, n := range []int{1, 64, 65, 1000, 60000} {
		sh := splitTensor(&share.Tensor{Shape: []int{n}, Data: truncReLUInputs(n, 16, uint64(n))}, 9)
		msb := runPair(t, func(ctx context.Context, s *Session) (*BitTensor, error) {
			return s.MSB(ctx, sh[s.Party()])
		})
		c := MSBCost(n)
		if c != (Cost{Rounds: 6, Bytes: msbWire(n)}) {
			t.Errorf("n=%d: MSBCost %+v, the test's formula %d bytes in 6 rounds", n, c, msbWire(n))
		}
		wantCost(t, msb, [2]int64{c.Rounds, c.Rounds}, [2]int64{c.Bytes, c.Bytes})

		relu := runPair(t, func(ctx context.Context, s *Session) (*share.Tensor, error) {
			return s.TruncReLU(ctx, sh[s.Party()], 16)
		})
		c = TruncReLUCost(n)
		if c != (Cost{Rounds: 7, Bytes: truncReLUWire(n)}) {
			t.Errorf("n=%d: TruncReLUCost %+v, the test's formula %d bytes in 7 rounds", n, c, truncReLUWire(n))
		}
		wantCost(t, relu, [2]int64{c.Rounds, c.Rounds}, [2]int64{c.Bytes, c.Bytes})
	}

	// The 32-bit table, through CompareRevealBounded: its sign circuit, then
	// the reveal of W words.
	for _, n := range []int{1, 65, 1000} {
		xs, ys := boundedPairs(rand.New(rand.NewPCG(31, uint64(n))), n)
		x := splitTensor(&share.Tensor{Shape: []int{n}, Data: xs}, 1)
		y := splitTensor(&share.Tensor{Shape: []int{n}, Data: ys}, 2)
		r := runPair(t, func(ctx context.Context, s *Session) ([]bool, error) {
			return s.CompareRevealBounded(ctx, x[s.Party()], y[s.Party()])
		})
		w := share.PackedWords(n)
		bytes := MessageBytes(w)
		for _, k := range SignCircuitWords(32) {
			bytes += MessageBytes(k * w)
		}
		wantCost(t, r, [2]int64{6, 6}, [2]int64{bytes, bytes})
	}
}
