package he

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestMulMaskedMergesSharedWeights: products that wait for the admission
// on the same weights share one pass, and each output is byte for byte the
// one a pass of its own gives (same key), so its shares are exact. The
// first product holds the admission until every other caller waits; then
// the callers on w (rows that are and are not whole row blocks, a
// single row) take one pass, the caller on other weights one, and the sum
// of two products one: 4 passes for 9 products. Without the merge it is 9.
// Both with one row of B per weight ciphertext and with two (KW = 2).
func TestMulMaskedMergesSharedWeights(t *testing.T) {
	for i, l := range []Layout{{MW: 4, NW: 16}, {MW: 2, NW: 16, KW: 2}} {
		if i > 0 && testing.Short() {
			break // the race detector's -short run: one layout (4 s there)
		}
		t.Run(fmt.Sprintf("MW=%d,KW=%d", l.MW, l.kw()), func(t *testing.T) { testMergesSharedWeights(t, l) })
	}
}

func testMergesSharedWeights(t *testing.T, l Layout) {
	s, err := NewScheme(DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	k, n := 3, 24 // two column blocks, the second partial
	rng := rand.New(rand.NewPCG(53, 53))
	rnd := newDetRand(53)
	sk, pk, err := s.KeyGen(rnd)
	if err != nil {
		t.Fatal(err)
	}
	load := func(seed byte, B []uint64) *Weights {
		ew, err := s.EncryptWeightsAt(sk, B, k, n, 0, l, [SeedSize]byte{seed}, rnd)
		if err != nil {
			t.Fatal(err)
		}
		w, err := s.LoadWeightsCompact(pk, ew)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	B1, B2 := fill(rng, k*n, "edges"), fill(rng, k*n, "random")
	w1, w2 := load(1, B1), load(2, B2)
	type call struct {
		m     int
		terms func(A, A2 []uint64) []Term
		want  func(A, A2 []uint64, m int) []uint64
	}
	on := func(w *Weights, B []uint64) call {
		return call{
			terms: func(A, _ []uint64) []Term { return []Term{{W: w, A: A}} },
			want:  func(A, _ []uint64, m int) []uint64 { return plainMul(A, B, m, k, n) },
		}
	}
	sum := call{
		terms: func(A, A2 []uint64) []Term { return []Term{{W: w1, A: A}, {W: w2, A: A2}} },
		want: func(A, A2 []uint64, m int) []uint64 {
			c, c2 := plainMul(A, B1, m, k, n), plainMul(A2, B2, m, k, n)
			for i := range c {
				c[i] += c2[i]
			}
			return c
		},
	}
	var calls []call
	// Rows in units of MW/4, so that the callers on w1 fit one pass's
	// accumulators (maxMergedAccumulatorBytes: 32 blocks) at either MW.
	for _, m := range []int{4, 1, 5, 8, 7, 9} { // the first holds the admission
		c := on(w1, B1)
		c.m = max(1, m*l.MW/4)
		calls = append(calls, c)
	}
	c := on(w2, B2)
	c.m = 6
	calls = append(calls, c)
	for _, m := range []int{3, 4} {
		c := sum
		c.m = m
		calls = append(calls, c)
	}
	As, A2s, Rs := make([][]uint64, len(calls)), make([][]uint64, len(calls)), make([][]uint64, len(calls))
	for i, c := range calls {
		As[i], A2s[i], Rs[i] = fill(rng, c.m*k, "edges"), fill(rng, c.m*k, "random"), fill(rng, c.m*n, "random")
	}
	run := func(i int) (*Output, error) {
		c := calls[i]
		return s.MulMaskedSum(c.terms(As[i], A2s[i]), l, c.m, n, Rs[i], newDetRand(uint64(100+i)))
	}

	var once sync.Once
	s.onAccumulate = func() {
		once.Do(func() {
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				s.mergeMu.Lock()
				w := len(s.waiting)
				s.mergeMu.Unlock()
				if w == len(calls)-1 {
					return
				}
			}
			t.Error("the other callers never all waited")
		})
	}
	outs, errs := make([]*Output, len(calls)), make([]error, len(calls))
	outs[0], errs[0] = nil, nil
	var wg sync.WaitGroup
	started := make(chan struct{})
	wg.Go(func() { close(started); outs[0], errs[0] = run(0) })
	<-started
	for s.nAccumulating.Load() == 0 { // the first holds the admission
		time.Sleep(time.Millisecond)
	}
	for i := 1; i < len(calls); i++ {
		wg.Go(func() { outs[i], errs[i] = run(i) })
	}
	wg.Wait()
	if got := s.MergeStats(); got != (MergeStats{Products: 9, Passes: 4}) {
		t.Errorf("merge stats %+v, want 9 products in 4 passes", got)
	}
	if peak := s.peakAccumulating.Load(); peak != 1 {
		t.Errorf("%d passes at once, want 1", peak)
	}
	s.onAccumulate = nil
	for i, c := range calls {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		C0, err := s.DecryptShares(sk, outs[i], c.m, n, l)
		if err != nil {
			t.Fatal(err)
		}
		checkShares(t, C0, Rs[i], c.want(As[i], A2s[i], c.m))
		alone, err := run(i) // nothing waits now: a pass of its own
		if err != nil {
			t.Fatal(err)
		}
		got, _ := outs[i].AppendBinary(nil)
		want, _ := alone.AppendBinary(nil)
		if !bytes.Equal(got, want) {
			t.Errorf("call %d (m = %d): merged output differs from its own pass's", i, c.m)
		}
	}
	if got := s.MergeStats(); got != (MergeStats{Products: 18, Passes: 13}) {
		t.Errorf("merge stats %+v after 9 more products alone, want 18 in 13 passes", got)
	}
}

// TestMergeBudget: a pass takes others only while their accumulators fit
// maxMergedAccumulatorBytes, and always runs its own product.
func TestMergeBudget(t *testing.T) {
	s, err := NewScheme(DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	w := &Weights{}
	l := Layout{MW: 1, NW: 1}
	budget := maxMergedAccumulatorBytes / s.blockAccumulatorBytes()
	job := func(m int) *mulJob {
		return &mulJob{terms: []Term{{W: w}}, l: l, m: m, n: 1, rb: m, done: make(chan struct{})}
	}
	big, a, b, c := job(budget+5), job(budget/2), job(budget/2), job(1)
	s.waiting = []*mulJob{big, a, b, c}
	if pass := s.take(big); len(pass) != 1 || pass[0] != big {
		t.Fatalf("a product over the budget took %d products, want only itself", len(pass))
	}
	if pass := s.take(a); len(pass) != 2 || pass[1] != b {
		t.Fatalf("took %d products, want a and b (c does not fit)", len(pass))
	}
	if pass := s.take(b); pass != nil {
		t.Fatal("a taken product was taken again")
	}
	if len(s.waiting) != 1 || s.waiting[0] != c {
		t.Fatalf("%d waiting, want c only", len(s.waiting))
	}
}
