package beaver

import (
	"context"
	"fmt"
	"slices"

	"github.com/selectformer/selectformer/share"
)

// The matrix kinds: batched matrix triples, and the triples of a product
// with the model owner's clear weights, masked by its reusable weight mask.
const (
	// KindMatTriple: shares of batched matrix triples C = A·B
	// (Typed.MatTriples).
	KindMatTriple Kind = 3
	// KindWeightTriple: the correlation of X·W with W the model owner's
	// (Typed.WeightTriple).
	KindWeightTriple Kind = 4
	// KindWeightVectorTriple: the correlation of X ⊙ γ with γ a row vector
	// of the model owner's (Typed.WeightVectorTriple).
	KindWeightVectorTriple Kind = 5
)

// WeightTriple is one party's part of a weight-mask correlation for Y = X·W,
// X m×k shared, W k×n in the model owner's clear. The data owner (party 1)
// receives the mask A (m×k, in the clear to it); both receive shares C of
// A·B, where B is the model owner's reusable mask of W (see Typed.WeightMask).
type WeightTriple struct {
	A []uint64 // party 1 only: the mask of X; nil for party 0
	C []uint64 // this party's share of A·B (m×n)
}

func (m Material) weightTriple() WeightTriple {
	return WeightTriple{A: m.Parts[0], C: m.Parts[1]}
}

// MatTriples returns shares of batch matrix triples: A is batch×m×k, B is
// batch×k×n and C = A·B batch×m×n, all row-major.
func (t Typed) MatTriples(ctx context.Context, stream uint32, batch, m, k, n int) (Triple, error) {
	return drawAs(ctx, t, Request{Kind: KindMatTriple, Stream: stream, Batch: batch, M: m, K: k, N: n}, Material.triple)
}

// MatTriplesRing returns shares of batch matrix triples in the ring
// Z_2^ringBits (Request.RingBits; 0 or 64 is MatTriples): A batch×m×k,
// B batch×k×n and C = A·B mod 2^ringBits. Only the low ringBits bits of the
// words are defined; they are masked here, so every word is below
// 2^ringBits whatever the provider returned (a provider may hand out a
// triple mod 2^64, which reduces to one mod 2^ringBits).
func (t Typed) MatTriplesRing(ctx context.Context, stream uint32, ringBits uint, batch, m, k, n int) (Triple, error) {
	return drawRingAs(ctx, t, Request{Kind: KindMatTriple, Stream: stream, Batch: batch, M: m, K: k, N: n}, ringBits, Material.triple)
}

// WeightTriple returns this party's part of a correlation for one product
// X·W with X m×k and W (id weightID) k×n: A (party 1) and shares of A·B.
func (t Typed) WeightTriple(ctx context.Context, stream uint32, weightID uint64, m, k, n int) (WeightTriple, error) {
	return drawAs(ctx, t, Request{Kind: KindWeightTriple, Stream: stream, WeightID: weightID, M: m, K: k, N: n}, Material.weightTriple)
}

// WeightVectorTriple returns this party's part of a correlation for one
// elementwise product X ⊙ γ with X m×n and γ a 1×n vector of the model owner
// broadcast over the rows, masked by WeightMask(weightID, 1, n) = b: A (m×n,
// party 1 only) and shares of A ⊙ b (b broadcast over rows).
func (t Typed) WeightVectorTriple(ctx context.Context, stream uint32, weightID uint64, m, n int) (WeightTriple, error) {
	return drawAs(ctx, t, Request{Kind: KindWeightVectorTriple, Stream: stream, WeightID: weightID, M: m, N: n}, Material.weightTriple)
}

func init() {
	Register(Correlation{
		Kind: KindMatTriple, Name: "mattriple", Fields: FieldBatch | FieldM | FieldK | FieldN | FieldRingBits,
		Dims: func(r Request) [][]int {
			return [][]int{{r.Batch, r.M, r.K}, {r.Batch, r.K, r.N}, {r.Batch, r.M, r.N}}
		},
		Format: func(r Request) string {
			return fmt.Sprintf("%d×(%d×%d·%d×%d)", r.Batch, r.M, r.K, r.K, r.N)
		},
		Local:    matTripleLocal,
		Parts:    func(r Request, _ int) []int { return matTripleLocal(r, 0) },
		DealtTo:  toParty1,
		Dealt:    func(r Request, party int) int { return party * r.Batch * r.M * r.N },
		Deal:     dealMatTriple,
		Assemble: assembleTriple,
		Verify:   verifyMatTriple,
		Sample:   Request{Kind: KindMatTriple, Batch: 2, M: 2, K: 3, N: 2},
		MACs:     func(r Request) uint64 { return uint64(r.Batch) * uint64(r.M) * uint64(r.K) * uint64(r.N) },
	})
	Register(Correlation{
		Kind: KindWeightTriple, Name: "weighttriple", Fields: FieldM | FieldK | FieldN | FieldWeightID,
		Dims: func(r Request) [][]int { return [][]int{{r.M, r.K}, {r.K, r.N}, {r.M, r.N}} },
		Format: func(r Request) string {
			return fmt.Sprintf("w%d %d×%d·%d×%d", r.WeightID, r.M, r.K, r.K, r.N)
		},
		Local:    func(r Request, party int) []int { return weightLocal(r, party, r.M*r.K) },
		Parts:    func(r Request, party int) []int { return weightParts(r, party, r.M*r.K) },
		DealtTo:  toParty0,
		Dealt:    weightDealt,
		Deal:     dealWeightTriple,
		Assemble: assembleWeightTriple,
		Verify:   verifyWeightTriple,
		Sample:   Request{Kind: KindWeightTriple, WeightID: 3, M: 2, K: 3, N: 2},
		Mask:     func(r Request) (int, int) { return r.K, r.N },
		MACs:     func(r Request) uint64 { return uint64(r.M) * uint64(r.K) * uint64(r.N) },
	})
	Register(Correlation{
		Kind: KindWeightVectorTriple, Name: "weightvectortriple", Fields: FieldM | FieldN | FieldWeightID,
		Dims:     func(r Request) [][]int { return [][]int{{r.M, r.N}} },
		Format:   func(r Request) string { return fmt.Sprintf("w%d %d×%d", r.WeightID, r.M, r.N) },
		Local:    func(r Request, party int) []int { return weightLocal(r, party, r.M*r.N) },
		Parts:    func(r Request, party int) []int { return weightParts(r, party, r.M*r.N) },
		DealtTo:  toParty0,
		Dealt:    weightDealt,
		Deal:     dealWeightVectorTriple,
		Assemble: assembleWeightTriple,
		Verify:   verifyWeightVectorTriple,
		Sample:   Request{Kind: KindWeightVectorTriple, WeightID: 4, M: 2, N: 3},
		Mask:     func(r Request) (int, int) { return 1, r.N },
	})
}

// MatTriple: party 0 expands A0, B0, C0, party 1 A1, B1 and gets
// C1 = (A0+A1)·(B0+B1) − C0, batched.

func matTripleLocal(r Request, party int) []int {
	a, b, c := r.Batch*r.M*r.K, r.Batch*r.K*r.N, r.Batch*r.M*r.N
	if party == 0 {
		return []int{a, b, c}
	}
	return []int{a, b}
}

func dealMatTriple(r Request, x Expansion, out [2][]uint64) error {
	p0, p1 := x.Local[0], x.Local[1]
	a, b := share.GetWords(len(p0[0])), share.GetWords(len(p0[1]))
	defer share.PutWords(a)
	defer share.PutWords(b)
	_ = share.AddVec(a, p0[0], p1[0])
	_ = share.AddVec(b, p0[1], p1[1])
	if err := share.BatchMatMulInto(out[1], a, b, r.Batch, r.M, r.K, r.N); err != nil {
		return fmt.Errorf("beaver: %v: %w", r, err)
	}
	_ = share.SubVec(out[1], out[1], p0[2])
	return nil
}

// verifyMatTriple checks C = A·B, modulo 2^r.Ring() (only the low bits of
// a narrow ring's material are defined).
func verifyMatTriple(r Request, _ []uint64, m0, m1 [][]uint64) error {
	a, b, c := make([]uint64, len(m0[0])), make([]uint64, len(m0[1])), make([]uint64, len(m0[2]))
	_ = share.AddVec(a, m0[0], m1[0])
	_ = share.AddVec(b, m0[1], m1[1])
	_ = share.AddVec(c, m0[2], m1[2])
	ab := make([]uint64, len(c))
	if err := share.BatchMatMulInto(ab, a, b, r.Batch, r.M, r.K, r.N); err != nil {
		return err
	}
	mask := r.ringMask()
	for i := range ab {
		ab[i] &= mask
		c[i] &= mask
	}
	if !slices.Equal(ab, c) {
		return fmt.Errorf("%v: C ≠ A·B", r)
	}
	return nil
}

// WeightTriple and WeightVectorTriple: party 1 expands the mask A of X and
// C1, and party 0 (which holds B, the model owner's weight mask) expands
// nothing and gets C0 = A·B − C1 (A ⊙ b for the vector, b broadcast over
// the rows).

// weightLocal is the Local of the weight kinds: nothing for party 0, A (a
// words) and C1 (M·N words) for party 1.
func weightLocal(r Request, party, a int) []int {
	if party == 0 {
		return nil
	}
	return []int{a, r.M * r.N}
}

// weightParts is the Parts of the weight kinds: A (a words, party 1 only)
// and C (M·N words).
func weightParts(r Request, party, a int) []int {
	if party == 0 {
		a = 0
	}
	return []int{a, r.M * r.N}
}

// weightDealt is the Dealt of the weight kinds: C0 (M·N words) to party 0.
func weightDealt(r Request, party int) int {
	if party == 0 {
		return r.M * r.N
	}
	return 0
}

func dealWeightTriple(r Request, x Expansion, out [2][]uint64) error {
	if err := share.MatMulInto(out[0], x.Local[1][0], x.Mask, r.M, r.K, r.N); err != nil {
		return fmt.Errorf("beaver: %v: %w", r, err)
	}
	_ = share.SubVec(out[0], out[0], x.Local[1][1])
	return nil
}

func dealWeightVectorTriple(r Request, x Expansion, out [2][]uint64) error {
	a, c1, mask := x.Local[1][0], x.Local[1][1], x.Mask
	for i := 0; i < r.M; i++ {
		row := i * r.N
		for j := 0; j < r.N; j++ {
			out[0][row+j] = a[row+j]*mask[j] - c1[row+j]
		}
	}
	return nil
}

func assembleWeightTriple(r Request, party int, local [][]uint64, dealt []uint64) [][]uint64 {
	if party == 0 {
		return [][]uint64{nil, dealt}
	}
	return local
}

func verifyWeightTriple(r Request, mask []uint64, m0, m1 [][]uint64) error {
	ab := make([]uint64, r.M*r.N)
	if err := share.MatMulInto(ab, m1[0], mask, r.M, r.K, r.N); err != nil {
		return err
	}
	for i := range ab {
		if ab[i] != m0[1][i]+m1[1][i] {
			return fmt.Errorf("%v: C ≠ A·B at %d", r, i)
		}
	}
	return nil
}

func verifyWeightVectorTriple(r Request, mask []uint64, m0, m1 [][]uint64) error {
	for i := range m1[0] {
		if m1[0][i]*mask[i%r.N] != m0[1][i]+m1[1][i] {
			return fmt.Errorf("%v: C ≠ A⊙b at %d", r, i)
		}
	}
	return nil
}
