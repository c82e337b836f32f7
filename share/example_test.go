package share_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"slices"

	"github.com/selectformer/selectformer/share"
)

// Reals are encoded as fixed-point ring words; sums of words are sums of
// reals, and out-of-range values are rejected.
func ExampleFixedPoint() {
	fp := share.DefaultFixedPoint
	a, _ := fp.Encode(1.25)
	b, _ := fp.Encode(-3.5)
	fmt.Println(fp.Decode(a + b))
	_, err := fp.Encode(1e6)
	fmt.Println(err)
	// Output:
	// -2.25
	// share: value 1e+06 out of fixed-point range: |x| must be < 32768 (2^15)
}

// A tensor is a shape over one flat slice of words; reshapes and slices are
// views, head splitting copies.
func ExampleTensor() {
	x, _ := share.NewTensor(1, 2, 4) // [batch, seq, heads·dim]
	for i := range x.Data {
		x.Data[i] = uint64(i)
	}
	heads, _ := share.SplitHeads(x, 2) // [batch, heads, seq, dim]
	fmt.Println(heads.Shape, heads.Data)
	flat, _ := x.Reshape(-1)
	fmt.Println(flat.Shape)
	// Output:
	// [1 2 2 2] [0 1 4 5 2 3 6 7]
	// [8]
}

// MatMul multiplies ring matrices with wrap-around: −1 is the word 2^64−1.
func ExampleMatMul() {
	minus1 := ^uint64(0)
	a, _ := share.FromData([]uint64{1, 2, minus1, 3}, 2, 2)
	b, _ := share.FromData([]uint64{4, 5, 6, 7}, 2, 2)
	c, _ := share.MatMul(a, b)
	for _, w := range c.Data {
		fmt.Print(int64(w), " ")
	}
	fmt.Println()
	// Output: 16 19 14 16
}

// Two PRGs built from the same seed and domain produce the same stream; a
// different domain gives an independent one.
func ExamplePRG() {
	var seed share.Seed // use share.NewSeed() in real code
	p, q := share.NewPRG(seed, "triples/0"), share.NewPRG(seed, "triples/0")
	r := share.NewPRG(seed, "triples/1")
	x, y, z := p.Uint64(), q.Uint64(), r.Uint64()
	fmt.Println(x == y, x == z, p.Intn(6) < 6)
	// Output: true false true
}

// An AESCTR stream is crypto/cipher's AES-128-CTR key stream, made with
// vector AES where the CPU has it; KeyStream writes it over any buffer.
func ExampleAESKey_CTR() {
	key := []byte("0123456789abcdef")
	k, _ := share.NewAESKey(key)
	var iv [16]byte
	fast := make([]byte, 1000)
	k.CTR(iv).KeyStream(fast)

	blk, _ := aes.NewCipher(key)
	ref := make([]byte, 1000)
	cipher.NewCTR(blk, iv[:]).XORKeyStream(ref, ref)
	fmt.Println(bytes.Equal(fast, ref))
	// Output: true
}

// The owner of a secret and its peer share it without sending the shares:
// both expand an agreed seed, the peer's share is the stream, the owner's is
// the secret minus it.
func ExampleOwnerShare() {
	seed, _ := share.NewSeed()
	secret := []uint64{42, 7}
	mine := make([]uint64, 2)
	_ = share.OwnerShare(mine, secret, share.NewPRG(seed, "input/0"))
	theirs := make([]uint64, 2)
	share.PeerShare(theirs, share.NewPRG(seed, "input/0"))
	back := make([]uint64, 2)
	_ = share.Reconstruct(back, mine, theirs)
	fmt.Println(back)
	// Output: [42 7]
}

// Split makes both shares at once, as a dealer does.
func ExampleSplit() {
	seed, _ := share.NewSeed()
	x0, x1 := share.Split([]uint64{5, 6, 7}, share.NewPRG(seed, "dealer"))
	x := make([]uint64, 3)
	_ = share.Reconstruct(x, x0, x1)
	fmt.Println(x)
	// Output: [5 6 7]
}

// Weights multiplied many times are packed once; each product then skips
// re-laying them out.
func ExampleMatMulPackedInto() {
	w, _ := share.PackMatrix([]uint64{1, 2, 3, 4, 5, 6}, 2, 3) // 2×3
	x := []uint64{1, 1, 2, 0}                                  // 2×2
	y := make([]uint64, 2*3)
	if err := share.MatMulPackedInto(y, x, 2, w); err != nil {
		fmt.Println(err)
	}
	fmt.Println(y)
	// Output: [5 7 9 2 4 6]
}

// The ring GEMM's micro-kernel is chosen by CPU at start-up (or forced with
// SELECTFORMER_RING_KERNEL); RingKernel names it for logs and benchmark
// reports, RingKernels lists what this CPU can run, generic always among
// them.
func ExampleRingKernel() {
	// A log line: share.RingKernelCPU() and share.RingKernel() give e.g.
	// "AuthenticAMD family 26 model 2, AVX-512 F DQ IFMA" and "avx512-vpmullq".
	fmt.Println(slices.Contains(share.RingKernels(), share.RingKernel()), slices.Contains(share.RingKernels(), "generic"))
	// Output:
	// true true
}

// A per-row value (here a mask word per token) spread over the row's width,
// then removed from a tensor in place.
func ExampleBroadcastLast() {
	mask := &share.Tensor{Shape: []int{2}, Data: []uint64{1, 0}}
	m, _ := share.BroadcastLast(mask, 3)
	fmt.Println(m.Shape, m.Data)
	x := &share.Tensor{Shape: []int{2, 3}, Data: []uint64{5, 6, 7, 8, 9, 10}}
	_ = share.SubInPlace(x, m)
	fmt.Println(x.Data)
	// Output:
	// [2 3] [1 1 1 0 0 0]
	// [4 5 6 8 9 10]
}
