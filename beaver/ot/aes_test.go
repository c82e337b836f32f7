package ot

import (
	"crypto/aes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFixedAESMatchesCryptoAES checks the key schedule and the assembly
// (where present: AES-NI, and 512-bit VAES for whole groups of 32 blocks)
// against crypto/aes on random keys and blocks, for lengths that exercise
// the eight-block loop, the 32-block loop and the tails, plain and with a
// tweak folded into the first round key.
func TestFixedAESMatchesCryptoAES(t *testing.T) {
	lengths := []int{0, 1, 7, 8, 9, 16, 31, 32, 33, 64, 100, 1000}
	for _, vaes := range []bool{false, true} {
		t.Run(map[bool]string{false: "aes-ni", true: "vaes512"}[vaes], func(t *testing.T) {
			if vaes && !useVAES512 {
				t.Skip("no 512-bit VAES on this CPU or build")
			}
			setUseVAES512(t, vaes)
			rng := rand.New(rand.NewPCG(1, 2))
			for trial := range 2 * len(lengths) {
				var key [16]byte
				for i := range key {
					key[i] = byte(rng.Uint32())
				}
				f := newFixedAES(key)
				ref, _ := aes.NewCipher(key[:])
				n := lengths[trial%len(lengths)]
				src := make([]Block, n)
				for i := range src {
					src[i] = Block{rng.Uint64(), rng.Uint64()}
				}
				got := make([]Block, n)
				f.encrypt(got, src)
				want := make([]Block, n)
				f.encryptGeneric(want, src)
				for i := range src {
					if got[i] != want[i] {
						t.Fatalf("trial %d block %d: fast %x, generic %x", trial, i, got[i], want[i])
					}
					var in, out [16]byte
					b := blockBytes(src[i : i+1])
					copy(in[:], b)
					ref.Encrypt(out[:], in[:])
					g := blockBytes(got[i : i+1])
					if string(g) != string(out[:]) {
						t.Fatalf("trial %d block %d: %x, crypto/aes %x", trial, i, g, out)
					}
				}
				tw := Block{rng.Uint64(), rng.Uint64()}
				f.encryptTweaked(got, src, tw)
				for i := range src {
					f.encryptGeneric(want[i:i+1], []Block{src[i].xor(tw)})
					if got[i] != want[i] {
						t.Fatalf("trial %d block %d, tweaked: fast %x, generic %x", trial, i, got[i], want[i])
					}
				}
			}
		})
	}
}

// TestAESKnownAnswer is the FIPS-197 appendix C.1 vector.
func TestAESKnownAnswer(t *testing.T) {
	key := [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	pt := []byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	want := "69c4e0d86a7b0430d8cdb78070b4c55a"
	f := newFixedAES(key)
	b := make([]Block, 1)
	copy(blockBytes(b), pt)
	f.encrypt(b, b)
	if got := hexString(blockBytes(b)); got != want {
		t.Fatalf("AES-128(FIPS-197 C.1) = %s, want %s", got, want)
	}
}

func hexString(b []byte) string {
	const d = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, x := range b {
		out = append(out, d[x>>4], d[x&15])
	}
	return string(out)
}

// TestTranspose128 checks the column→row transpose of one 128-OT block
// against a per-bit reference.
func TestTranspose128(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var cols [baseCount]Block
	for i := range cols {
		cols[i] = Block{rng.Uint64(), rng.Uint64()}
	}
	rows := make([]Block, 128)
	transpose128(rows, &cols)
	for j := range 128 {
		for i := range 128 {
			if got, want := bitOf(rows[j], i), bitOf(cols[i], j); got != want {
				t.Fatalf("row %d bit %d = %d, want %d", j, i, got, want)
			}
		}
	}
}

// BenchmarkAESBlocks compares 512-bit VAES (32 blocks at a time), the
// eight-block AES-NI loop and crypto/aes called once per block (the
// portable path).
func BenchmarkAESBlocks(b *testing.B) {
	for _, c := range []struct {
		name      string
		asm, vaes bool
	}{{"vaes512", true, true}, {"asm", true, false}, {"crypto", false, false}} {
		b.Run(c.name, func(b *testing.B) {
			if c.asm && !useAESNI || c.vaes && !useVAES512 {
				b.Skip("no such assembly here")
			}
			setAESNI(b, c.asm)
			setUseVAES512(b, c.vaes)
			f := newFixedAES([16]byte{1})
			buf := make([]Block, 4096)
			b.SetBytes(int64(16 * len(buf)))
			for b.Loop() {
				f.encrypt(buf, buf)
			}
		})
	}
}

// BenchmarkTranspose: one 128-OT block's transpose, by the AVX-512 GFNI
// assembly and by the portable Go.
func BenchmarkTranspose(b *testing.B) {
	var cols [baseCount]Block
	rows := make([]Block, 128)
	for _, c := range []struct {
		name string
		f    func([]Block, *[baseCount]Block)
		have bool
	}{{"gfni", transpose128, useTransposeGFNI}, {"portable", transpose128Generic, true}} {
		b.Run(c.name, func(b *testing.B) {
			if !c.have {
				b.Skip("no such assembly here")
			}
			b.SetBytes(16 * 128)
			for b.Loop() {
				c.f(rows, &cols)
			}
		})
	}
}

// setAESNI switches the assembly path for the duration of a test (it is a
// variable only where an assembly implementation exists).
func setAESNI(tb testing.TB, on bool) {
	tb.Helper()
	setUseAESNI(tb, on)
}

// TestHashRowsAgree: the hash of one block a row (w = 1 and 2) in 512-bit
// VAES (aes_amd64.s, where the CPU has it) equals the portable hash, for
// whole groups of 32 rows and a remainder, with and without an offset,
// and OT indices that wrap past 2^64 inside a group.
func TestHashRowsAgree(t *testing.T) {
	if !useVAES512 {
		t.Log("no 512-bit VAES on this CPU: both sides are the portable hash")
	}
	pi := newFixedAES([16]byte{9})
	rng := rand.New(rand.NewPCG(6, 6))
	for _, w := range []int{1, 2, 8, 16, 64} {
		for _, n := range []int{8, 32, 64, 101} {
			for _, j0 := range []uint64{0, 1 << 40, math.MaxUint64 - 40} {
				for _, off := range []Block{{}, {rng.Uint64(), rng.Uint64()}} {
					rows := make([]Block, n)
					for i := range rows {
						rows[i] = Block{rng.Uint64(), rng.Uint64()}
					}
					got, want := make([]uint64, n*w), make([]uint64, n*w)
					newHasher(pi, 11).hash(got, rows, off, j0, w)
					newHasher(pi, 11).hashPass(want, rows, off, j0, w, (w+1)/2) // the portable pass
					if !slices.Equal(got, want) {
						t.Fatalf("w %d, %d rows, j0 %#x, off %v: the hashes differ", w, n, j0, off)
					}
				}
			}
		}
	}
}

// BenchmarkHash: the hash of a group of 64 rows as the COT generators
// take them (cotSender, cotReceiver), at widths of one block a row (w = 1,
// 2) and of the matrix triples (16, 64): hash (512-bit VAES where the CPU
// has it) against the portable pass.
func BenchmarkHash(b *testing.B) {
	pi := newFixedAES([16]byte{9})
	rows := make([]Block, 64)
	for i := range rows {
		rows[i] = Block{uint64(i), ^uint64(i)}
	}
	off := Block{3, 4}
	for _, w := range []int{1, 2, 16, 64} {
		out := make([]uint64, 64*w)
		h := newHasher(pi, 1)
		b.Run(fmt.Sprintf("w=%d", w), func(b *testing.B) {
			for i := range b.N {
				h.hash(out, rows, off, uint64(64*i), w)
			}
		})
		b.Run(fmt.Sprintf("w=%d/portable", w), func(b *testing.B) {
			for i := range b.N {
				h.hashPass(out, rows, off, uint64(64*i), w, (w+1)/2)
			}
		})
	}
}

// TestHashPassesAgree: hash and hashBlocks over more rows than one pass of
// scratch give, row for row, what one call per row gives (the passes only
// split the rows), and the hasher's scratch stays within
// hashScratchBlocks.
func TestHashPassesAgree(t *testing.T) {
	pi := newFixedAES([16]byte{7})
	rng := rand.New(rand.NewPCG(5, 5))
	off := Block{rng.Uint64(), rng.Uint64()}
	for _, w := range []int{1, 2, 5} {
		per := max(1, hashScratchBlocks/(1+(w+1)/2))
		n := 2*per + 3
		rows := make([]Block, n)
		for i := range rows {
			rows[i] = Block{rng.Uint64(), rng.Uint64()}
		}
		h, ref := newHasher(pi, 3), newHasher(pi, 3)
		got, want := make([]uint64, n*w), make([]uint64, n*w)
		h.hash(got, rows, off, 100, w)
		for k := range rows {
			ref.hash(want[k*w:(k+1)*w], rows[k:k+1], off, 100+uint64(k), w)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("w %d: hash in passes differs from row by row", w)
		}
		if s := cap(h.y) + cap(h.z); s > hashScratchBlocks {
			t.Fatalf("w %d: %d blocks of scratch for %d rows, want ≤ %d", w, s, n, hashScratchBlocks)
		}
	}
	n := hashScratchBlocks + 3
	rows := make([]Block, n)
	for i := range rows {
		rows[i] = Block{rng.Uint64(), rng.Uint64()}
	}
	h, ref := newHasher(pi, 4), newHasher(pi, 4)
	got, want := make([]Block, n), make([]Block, n)
	h.hashBlocks(got, rows, off, 9)
	for k := range rows {
		ref.hashBlocks(want[k:k+1], rows[k:k+1], off, 9+uint64(k))
	}
	if !slices.Equal(got, want) {
		t.Fatal("hashBlocks in passes differs from row by row")
	}
	if cap(h.y) > hashScratchBlocks {
		t.Fatalf("hashBlocks: %d blocks of scratch, want ≤ %d", cap(h.y), hashScratchBlocks)
	}
}
