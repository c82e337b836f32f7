package ot

import (
	"math/rand/v2"
	"testing"
)

// gfMulRef is the bit-by-bit reference product in GF(2^128): shift and add,
// reducing a·X by X^128 = X^7 + X^2 + X + 1 at each step.
func gfMulRef(a, b Block) Block {
	var r Block
	for i := range 128 {
		if bitOf(b, i) == 1 {
			r = r.xor(a)
		}
		carry := a.Hi >> 63
		a = Block{a.Lo << 1, a.Hi<<1 | a.Lo>>63}
		a.Lo ^= -carry & 0x87
	}
	return r
}

// gfOperands returns edge operands (zero, one, X^63, X^64, X^127, all ones,
// single words) and n random ones.
func gfOperands(rng *rand.Rand, n int) []Block {
	ops := []Block{{}, {1, 0}, {1 << 63, 0}, {0, 1}, {0, 1 << 63}, {^uint64(0), ^uint64(0)},
		{^uint64(0), 0}, {0, ^uint64(0)}, {0x87, 0}, {0x5555555555555555, 0xaaaaaaaaaaaaaaaa}}
	for range n {
		ops = append(ops, Block{rng.Uint64(), rng.Uint64()})
	}
	return ops
}

func TestGF128MulReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	ops := gfOperands(rng, 40)
	for _, a := range ops {
		for _, b := range ops {
			if got, want := gfMul(a, b), gfMulRef(a, b); got != want {
				t.Fatalf("gfMul(%x, %x) = %x, want %x", a, b, got, want)
			}
		}
	}
	// The field's laws on random elements: X^128 reduces to X^7+X^2+X+1,
	// products commute and distribute.
	if got := gfMul(Block{0, 1 << 63}, Block{2, 0}); got != (Block{0x87, 0}) {
		t.Fatalf("X^127·X = %x, want X^7+X^2+X+1", got)
	}
	for range 100 {
		a, b, c := ops[rng.IntN(len(ops))], ops[rng.IntN(len(ops))], ops[rng.IntN(len(ops))]
		if gfMul(a, b) != gfMul(b, a) || gfMul(a, b.xor(c)) != gfMul(a, b).xor(gfMul(a, c)) {
			t.Fatalf("field laws fail at %x, %x, %x", a, b, c)
		}
	}
}

func TestCLMul64(t *testing.T) {
	ref := func(x, y uint64) (lo, hi uint64) {
		for i := range 64 {
			if y>>i&1 == 1 {
				lo ^= x << i
				if i > 0 {
					hi ^= x >> (64 - i)
				}
			}
		}
		return lo, hi
	}
	rng := rand.New(rand.NewPCG(1, 2))
	xs := []uint64{0, 1, 1 << 63, ^uint64(0), 0x1111111111111111, 0x8888888888888888}
	for range 200 {
		xs = append(xs, rng.Uint64())
	}
	for _, x := range xs {
		for _, y := range xs[:40] {
			l, h := clmul64(x, y)
			wl, wh := ref(x, y)
			if l != wl || h != wh {
				t.Fatalf("clmul64(%#x, %#x) = %#x:%#x, want %#x:%#x", x, y, h, l, wh, wl)
			}
		}
	}
}

// TestGF128SumAsm checks the PCLMULQDQ accumulation against the portable
// one (odd and even lengths: the unrolled loop and its tail) and both
// against the reference products' sum.
func TestGF128SumAsm(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 3, 7, 64, 257} {
		a, b := gfOperands(rng, n), gfOperands(rng, n)
		rng.Shuffle(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] })
		var want Block
		for i := range a {
			want = want.xor(gfMulRef(a[i], b[i]))
		}
		var gen gfSum
		gen.mulAddGeneric(a, b)
		if got := gen.reduce(); got != want {
			t.Fatalf("n=%d: portable sum %x, want %x", n, got, want)
		}
		var s gfSum
		s.mulAdd(a, b)
		if s != gen {
			t.Fatalf("n=%d: mulAdd (PCLMULQDQ %v) %x, portable %x", n, usePCLMUL, s, gen)
		}
		if usePCLMUL {
			var asm gfSum
			asm.lo = Block{1, 2} // accumulates onto what is there
			clmulAccumAsm(&asm, &a[0], &b[0], len(a))
			asm.lo = asm.lo.xor(Block{1, 2})
			if asm != gen {
				t.Fatalf("n=%d: PCLMULQDQ %x, portable %x", n, asm, gen)
			}
		}
	}
}
