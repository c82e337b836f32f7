//go:build !purego

package ot

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// TestLPNAsmAgree: the assembly encoding gives the portable one's rows and
// sums bit for bit: rows for codes small enough that most columns repeat
// a row (k = 10, 11: every such column must be caught and fixed) and for
// the main set's k, over partial chunks; sums and parities for column
// counts around a word of bits, with the words beyond the columns' left
// alone.
func TestLPNAsmAgree(t *testing.T) {
	if !useLPNAsm {
		t.Skip("no AVX-512 F and CD on this CPU")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	ks := make([]byte, lpnChunk*lpnRowBytes)
	for _, k := range []int{ferretCodeWeight, 11, 200, ferretMain.k, 1<<32 - 1} {
		a, err := newLPNCode(share.Seed{byte(k)}, 2, k)
		if err != nil {
			t.Fatal(err)
		}
		for _, cols := range []int{1, 7, 64, 65, lpnChunk - 1, lpnChunk} {
			got := make([]uint32, cols*ferretCodeWeight)
			a.rows(got, 3*lpnChunk, ks)
			want := make([]uint32, len(got))
			a.rowsGeneric(want, ks)
			if !slices.Equal(got, want) {
				t.Fatalf("k=%d, %d columns: the assembly's rows differ", k, cols)
			}
		}
	}
	for _, k := range []int{300, ferretMain.k} {
		a, _ := newLPNCode(share.Seed{9}, 0, k)
		base := make([]Block, k)
		fillBlocks(share.NewPRG(share.Seed{6}, "base"), base)
		u := share.NewPRG(share.Seed{7}, "u").Words(share.PackedWords(k))
		idx := make([]uint32, lpnChunk*ferretCodeWeight)
		for _, cols := range []int{1, 63, 64, 65, 1000, lpnChunk} {
			t.Run(fmt.Sprintf("k=%d/cols=%d", k, cols), func(t *testing.T) {
				a.rows(idx[:cols*ferretCodeWeight], lpnChunk, ks)
				z := make([]Block, cols)
				for i := range z {
					z[i] = Block{rng.Uint64(), rng.Uint64()}
				}
				words := share.PackedWords(cols) + 1 // one guard word
				bits := make([]uint64, words)
				for i := range bits {
					bits[i] = rng.Uint64()
				}
				wantZ, wantBits := slices.Clone(z), slices.Clone(bits)
				gatherGeneric(wantZ, base, idx, wantBits, u, 0)
				gotZ, gotBits := slices.Clone(z), slices.Clone(bits)
				lpnGatherBitsAsm(&gotZ[0], &base[0], &idx[0], cols, &u[0], &gotBits[0])
				if !slices.Equal(gotZ, wantZ) || !slices.Equal(gotBits, wantBits) {
					t.Fatalf("with the choices: sums equal %v, parities %x, want %x", slices.Equal(gotZ, wantZ), gotBits, wantBits)
				}
				wantZ = slices.Clone(z)
				gatherGeneric(wantZ, base, idx, nil, nil, 0)
				gotZ = slices.Clone(z)
				lpnGatherAsm(&gotZ[0], &base[0], &idx[0], cols)
				if !slices.Equal(gotZ, wantZ) {
					t.Fatal("the sender's sums differ")
				}
			})
		}
	}
}
