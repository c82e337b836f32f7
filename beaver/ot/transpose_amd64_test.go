package ot

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestTranspose128Agree: the AVX-512 transpose gives the portable one's
// rows bit for bit, on random blocks and on single set bits (each of the
// 128×128 positions lands where the portable transpose puts it).
func TestTranspose128Agree(t *testing.T) {
	if !useTransposeGFNI {
		t.Skip("no AVX-512 VBMI and GFNI on this CPU")
	}
	rng := rand.New(rand.NewPCG(9, 10))
	check := func(name string, cols *[baseCount]Block) {
		t.Helper()
		want, got := make([]Block, 128), make([]Block, 128)
		transpose128Generic(want, cols)
		transpose128Asm((*[128]Block)(got), cols)
		for o := range want {
			if got[o] != want[o] {
				t.Fatalf("%s: row %d = %x, want %x", name, o, got[o], want[o])
			}
		}
	}
	for range 100 {
		var cols [baseCount]Block
		for i := range cols {
			cols[i] = Block{rng.Uint64(), rng.Uint64()}
		}
		check("random", &cols)
	}
	for i := range 128 {
		for o := range 128 {
			var cols [baseCount]Block
			if o < 64 {
				cols[i].Lo = 1 << o
			} else {
				cols[i].Hi = 1 << (o - 64)
			}
			check("one bit", &cols)
		}
	}
}

// TestTransposeGenerated: transpose_amd64.s is what testdata/gen_transpose.go
// writes, so that an edit to either shows up here.
func TestTransposeGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
	out := filepath.Join(t.TempDir(), "transpose_amd64.s")
	if b, err := exec.Command("go", "run", "./testdata/gen_transpose.go", out).CombinedOutput(); err != nil {
		t.Fatalf("go run ./testdata/gen_transpose.go: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("transpose_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("transpose_amd64.s differs from what testdata/gen_transpose.go writes: run go generate ./beaver/ot")
	}
}
