package share

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSharingRoundTrips checks that every way of making shares reconstructs
// the secret: the owner/peer pair expanding one seed, and Split.
func TestSharingRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, n := range []int{0, 1, 7, 64, 1000, ownerShareChunk, ownerShareChunk + 1, 3*ownerShareChunk - 5} {
		x := randWords(rng, n, "edge")
		if n > 0 {
			x[0] = 1 << 63
		}
		seed := testSeed(byte(n))

		// Owner and peer each expand the same (seed, domain) locally.
		x0 := make([]uint64, n)
		owner := NewPRG(seed, "input")
		must(t, OwnerShare(x0, x, owner))
		// Exactly x − the first n stream words, and the stream goes on
		// after them.
		stream := NewPRG(seed, "input").Words(n + 1)
		for i := range x0 {
			if x0[i] != x[i]-stream[i] {
				t.Fatalf("n=%d: OwnerShare word %d is not x − r", n, i)
			}
		}
		if next := owner.Uint64(); next != stream[n] {
			t.Fatalf("n=%d: after OwnerShare the stream is at the wrong word", n)
		}
		x1 := make([]uint64, n)
		PeerShare(x1, NewPRG(seed, "input"))
		got := make([]uint64, n)
		must(t, Reconstruct(got, x0, x1))
		if !slices.Equal(got, x) {
			t.Fatalf("n=%d: owner+peer shares do not reconstruct", n)
		}
		// The peer's share is the bare stream, independent of x.
		if firstDiff(x1, NewPRG(seed, "input").Words(n)) >= 0 {
			t.Fatalf("n=%d: PeerShare is not the PRG stream", n)
		}
		// In place: dst may alias x.
		xa := slices.Clone(x)
		must(t, OwnerShare(xa, xa, NewPRG(seed, "input")))
		if firstDiff(xa, x0) >= 0 {
			t.Fatalf("n=%d: in-place OwnerShare differs", n)
		}

		s0, s1 := Split(x, NewPRG(seed, "split"))
		must(t, Reconstruct(got, s0, s1))
		if !slices.Equal(got, x) || len(s0) != n || len(s1) != n {
			t.Fatalf("n=%d: Split shares do not reconstruct", n)
		}
		// Shares are masked: for n > 4 no share equals the secret.
		if n > 4 && (slices.Equal(s0, x) || slices.Equal(s1, x) || slices.Equal(x0, x)) {
			t.Fatalf("n=%d: a share equals the secret", n)
		}
	}
}

// TestSharingLinearity checks that adding shares adds secrets and that a
// public constant is added once (by party 0).
func TestSharingLinearity(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	const n = 50
	x, y, p := randWords(rng, n, "full"), randWords(rng, n, "full"), randWords(rng, n, "full")
	x0, x1 := Split(x, NewPRG(testSeed(1), "x"))
	y0, y1 := Split(y, NewPRG(testSeed(1), "y"))
	z0, z1 := make([]uint64, n), make([]uint64, n)
	must(t, AddVec(z0, x0, y0))
	must(t, AddVec(z1, x1, y1))
	must(t, AddPublicVec(z0, z0, p, 0))
	must(t, AddPublicVec(z1, z1, p, 1))
	got, want := make([]uint64, n), make([]uint64, n)
	must(t, Reconstruct(got, z0, z1))
	for i := range want {
		want[i] = x[i] + y[i] + p[i]
	}
	if !slices.Equal(got, want) {
		t.Fatal("shares of x+y+p do not reconstruct to x+y+p")
	}
}

func TestSharingErrors(t *testing.T) {
	p := NewPRG(testSeed(0), "err")
	if err := OwnerShare(make([]uint64, 2), make([]uint64, 3), p); err == nil {
		t.Error("OwnerShare length mismatch: no error")
	}
	if err := Reconstruct(make([]uint64, 2), make([]uint64, 2), make([]uint64, 3)); err == nil {
		t.Error("Reconstruct length mismatch: no error")
	}
	if err := Reconstruct(make([]uint64, 1), make([]uint64, 2), make([]uint64, 2)); err == nil {
		t.Error("Reconstruct short destination: no error")
	}
}
