package he

import (
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestArith checks the RNS helpers against math/big: the rounded encoding
// round(Q·v/2^64), the three-word reduction of the flood, the centred lift,
// and the modulus switch round(2^l·c/Q) mod 2^l within 1/2 + 2^-8.
func TestArith(t *testing.T) {
	s := defaultScheme
	Q := s.rq.Modulus()
	rng := rand.New(rand.NewPCG(11, 12))
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	vals := append([]uint64{}, edges...)
	for range 200 {
		vals = append(vals, rng.Uint64())
	}
	for _, v := range vals {
		// encode
		num := new(big.Int).Mul(Q, new(big.Int).SetUint64(v))
		num.Add(num, new(big.Int).Rsh(two64, 1))
		num.Quo(num, two64)
		for i, q := range s.p.Q {
			if got, want := s.encode(v, i), new(big.Int).Mod(num, new(big.Int).SetUint64(q)).Uint64(); got != want {
				t.Fatalf("encode(%#x) mod q%d = %d, want %d", v, i, got, want)
			}
			signed := big.NewInt(int64(v))
			if got, want := liftCentered(v, q), new(big.Int).Mod(signed, new(big.Int).SetUint64(q)).Uint64(); got != want {
				t.Fatalf("liftCentered(%#x) = %d, want %d", v, got, want)
			}
		}
		// words3
		w := [3]uint64{v, rng.Uint64(), rng.Uint64()}
		wb := new(big.Int).SetUint64(w[2])
		wb.Lsh(wb, 64).Add(wb, new(big.Int).SetUint64(w[1]))
		wb.Lsh(wb, 64).Add(wb, new(big.Int).SetUint64(w[0]))
		for i, q := range s.p.Q {
			if got, want := s.words3(w, i), new(big.Int).Mod(wb, new(big.Int).SetUint64(q)).Uint64(); got != want {
				t.Fatalf("words3 mod q%d = %d, want %d", i, got, want)
			}
		}
	}
	// modSwitch on random c ∈ [0, Q) and on edges 0, 1, Q−1, Q/2.
	cs := []*big.Int{big.NewInt(0), big.NewInt(1), new(big.Int).Sub(Q, big.NewInt(1)), new(big.Int).Rsh(Q, 1)}
	for range 300 {
		b := make([]byte, 28)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		cs = append(cs, new(big.Int).Mod(new(big.Int).SetBytes(b), Q))
	}
	for _, c := range cs {
		res := make([]uint64, len(s.p.Q))
		for i, q := range s.p.Q {
			res[i] = new(big.Int).Mod(c, new(big.Int).SetUint64(q)).Uint64()
		}
		for _, mc := range []*msConst{&s.ms0, &s.ms1} {
			got := s.modSwitch(mc, res)
			gb := new(big.Int).SetUint64(got.hi)
			gb.Lsh(gb, 64).Add(gb, new(big.Int).SetUint64(got.lo))
			// exact = 2^l·c/Q; |got − exact| mod 2^l ≤ 1/2 + 2^-8.
			exact := new(big.Float).SetPrec(400).SetInt(new(big.Int).Lsh(c, uint(mc.l)))
			exact.Quo(exact, new(big.Float).SetPrec(400).SetInt(Q))
			diff := new(big.Float).SetPrec(400).SetInt(gb)
			diff.Sub(diff, exact)
			mod := new(big.Float).SetPrec(400).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(mc.l)))
			for diff.Cmp(new(big.Float).Quo(mod, big.NewFloat(2))) > 0 {
				diff.Sub(diff, mod)
			}
			for diff.Cmp(new(big.Float).Quo(mod, big.NewFloat(-2))) < 0 {
				diff.Add(diff, mod)
			}
			if f, _ := diff.Float64(); f > 0.5+1.0/256 || f < -0.5-1.0/256 {
				t.Fatalf("modSwitch to 2^%d: error %v", mc.l, f)
			}
		}
	}
}

// TestUnpackBelow: the aligned fast path of readPoly unpacks what bitWriter
// packed, value for value, at every width it takes and at lengths around
// its 8-byte window's end, and reports a value at or above q.
func TestUnpackBelow(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, width := range []uint{1, 7, 8, 13, 31, 32, 33, 54, 55, 56} {
		for _, n := range []int{8, 16, 24, 40, 64, 8192} {
			mask := uint64(1)<<width - 1
			vals := make([]uint64, n)
			w := &bitWriter{}
			for i := range vals {
				vals[i] = rng.Uint64() & mask
				w.write(vals[i], width)
			}
			buf := w.flush()
			if len(buf)*8 != n*int(width) {
				t.Fatalf("width %d, n %d: %d bytes", width, n, len(buf))
			}
			got := make([]uint64, n)
			if !unpackBelow(got, buf, width, mask+1) {
				t.Fatalf("width %d, n %d: a value reported ≥ 2^%d", width, n, width)
			}
			for i := range vals {
				if got[i] != vals[i] {
					t.Fatalf("width %d, n %d: value %d = %#x, want %#x", width, n, i, got[i], vals[i])
				}
			}
			// The first value (read in place for long inputs) and the last
			// (from the padded tail) each equal the bound once.
			for _, bound := range []uint64{vals[0], vals[n-1]} {
				if unpackBelow(got, buf, width, bound) {
					t.Fatalf("width %d, n %d: value %#x not reported at bound %#x", width, n, bound, bound)
				}
			}
		}
	}
}
