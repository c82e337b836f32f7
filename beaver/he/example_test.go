package he_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/selectformer/selectformer/beaver/he"
)

// The weight-mask correlation for a 3×4 · 4×5 product, both parties in one
// process: P0 holds B, P1 holds A and picks its share C1 = R; the messages
// cross as bytes.
func Example() {
	s, err := he.NewScheme(he.DefaultParams())
	if err != nil {
		panic(err)
	}
	m, k, n := 3, 4, 5
	rng := rand.New(rand.NewPCG(1, 2))
	words := func(c int) []uint64 {
		v := make([]uint64, c)
		for i := range v {
			v[i] = rng.Uint64()
		}
		return v
	}
	B, A, R := words(k*n), words(m*k), words(m*n)
	layout, _ := s.ChooseLayout(m, k, n)

	// P0, once: keys and the encrypted weights.
	sk, pk, _ := s.KeyGen(nil)
	ew, _ := s.EncryptWeights(sk, B, k, n, layout, nil)
	pkMsg, _ := pk.AppendBinary(nil)
	ewMsg, _ := ew.AppendBinary(nil)

	// P1, once: decode with its own bounds, prepare.
	pk1, _ := s.DecodePublicKey(pkMsg)
	ew1, err := s.DecodeEncryptedWeights(ewMsg, k, n)
	if err != nil {
		panic(err)
	}
	w, _ := s.LoadWeights(pk1, ew1)

	// P1, per candidate: the output message; its share is C1 = R.
	out, _ := s.MulMasked(w, A, m, R, nil)
	outMsg, _ := out.AppendBinary(nil)

	// P0, per candidate: its share C0.
	out0, err := s.DecodeOutput(outMsg, m, n)
	if err != nil {
		panic(err)
	}
	C0, _ := s.DecryptShares(sk, out0, m, n, layout)

	ok := true
	for i := range m {
		for j := range n {
			var want uint64
			for r := range k {
				want += A[i*k+r] * B[r*n+j]
			}
			ok = ok && C0[i*n+j]+R[i*n+j] == want
		}
	}
	sz := s.Sizes(m, k, n, layout)
	fmt.Println("C0 + C1 = A·B:", ok)
	fmt.Println("output bytes match Sizes:", int64(len(outMsg)) == sz.Output)
	// Output:
	// C0 + C1 = A·B: true
	// output bytes match Sizes: true
}
