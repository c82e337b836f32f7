package protocol

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
	"github.com/selectformer/selectformer/transport"
)

// Test harness shared by every protocol test (arith, matmul, trunc and the
// nonlinear half): runPair runs one function as both parties over an
// in-memory transport.Pipe with an in-process dealer and returns both outputs
// and the costs.

// pairResult holds what runPair observed: each party's output, the Stats
// delta of each party's stream while f ran (session setup excluded), each
// party's dealer-traffic delta, and (when pairConfig.Record is set) every
// word message each party received.
type pairResult[T any] struct {
	Out    [2]T
	Stats  [2]transport.Stats
	Dealer [2]beaver.DealerStats
	Recv   [2][][]uint64
}

// pairConfig tunes runPairWith; the zero value gives the defaults of runPair.
type pairConfig struct {
	FP     share.FixedPoint // default share.DefaultFixedPoint
	Seed   byte             // dealer seeds are derived from it (deterministic)
	Record bool             // keep a copy of every received word message
	Stream uint32           // stream id (default 1)
}

// testSeed returns a fixed seed for tests.
func testSeed(b byte, label string) share.Seed {
	var s share.Seed
	s[0] = b
	return s.Derive("protocol-test/" + label)
}

// runPair runs f as party 0 and party 1 concurrently on two sessions over a
// transport.Pipe with an in-process dealer (fixed seeds), failing t if either
// returns an error.
func runPair[T any](t testing.TB, f func(ctx context.Context, s *Session) (T, error)) pairResult[T] {
	t.Helper()
	return runPairWith(t, pairConfig{}, f)
}

// runPairWith is runPair with a configuration.
func runPairWith[T any](t testing.TB, cfg pairConfig, f func(ctx context.Context, s *Session) (T, error)) pairResult[T] {
	t.Helper()
	if cfg.FP == (share.FixedPoint{}) {
		cfg.FP = share.DefaultFixedPoint
	}
	if cfg.Stream == 0 {
		cfg.Stream = 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type out struct {
		v    T
		cost twoparty.Cost
		recv [][]uint64
	}
	seeds := [2]share.Seed{testSeed(cfg.Seed, "dealer0"), testSeed(cfg.Seed, "dealer1")}
	r, err := twoparty.Run(ctx, twoparty.Config{Seeds: seeds}, func(ctx context.Context, p *twoparty.Party) (out, error) {
		var o out
		s, err := NewSession(ctx, p.ID, p.Conn.Stream(cfg.Stream), p.Provider, cfg.FP)
		if err != nil {
			return o, err
		}
		if cfg.Record {
			s.recvTap = func(w []uint64) { o.recv = append(o.recv, append([]uint64(nil), w...)) }
		}
		m := twoparty.NewMeter(s)
		o.v, err = f(ctx, s)
		o.cost = m.Since()
		return o, err
	})
	if err != nil {
		t.Fatal(err)
	}
	var res pairResult[T]
	for p, o := range r.Out {
		res.Out[p], res.Stats[p], res.Dealer[p], res.Recv[p] = o.v, o.cost.Stream, o.cost.Dealer, o.recv
	}
	return res
}

// splitTensor returns deterministic shares of the public tensor x.
func splitTensor(x *share.Tensor, seed byte) [2]*share.Tensor {
	prg := share.NewPRG(testSeed(seed, "split"), "split")
	a, b := share.Split(x.Data, prg)
	return [2]*share.Tensor{
		{Shape: append([]int(nil), x.Shape...), Data: a},
		{Shape: append([]int(nil), x.Shape...), Data: b},
	}
}

// openPair reconstructs the secret from both parties' shares.
func openPair(t testing.TB, sh [2]*share.Tensor) *share.Tensor {
	t.Helper()
	if sh[0] == nil || sh[1] == nil || !sh[0].SameShape(sh[1]) {
		t.Fatalf("shares %v and %v do not match", sh[0], sh[1])
	}
	out := &share.Tensor{Shape: append([]int(nil), sh[0].Shape...), Data: make([]uint64, sh[0].Len())}
	if err := share.Reconstruct(out.Data, sh[0].Data, sh[1].Data); err != nil {
		t.Fatal(err)
	}
	return out
}

// encodeT encodes xs with fp into a tensor of the given shape.
func encodeT(t testing.TB, fp share.FixedPoint, xs []float64, shape ...int) *share.Tensor {
	t.Helper()
	x, err := fp.EncodeTensor(xs, shape...)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// wireBytes is what the transport writes for one message of words ring
// words: the payload plus a 10-byte header per frame of at most
// transport.DefaultMaxFrame bytes (a multi-frame message also carries its
// 8-byte total length).
// truncWire is msg(⌈n/64⌉), what TruncBy of n elements sends: one bit per
// element.
func truncWire(n int) int64 { return wireBytes(share.PackedWords(n)) }

func wireBytes(words int) int64 {
	const header, chunk = 10, transport.DefaultMaxFrame
	b := int64(8 * words)
	if b <= chunk {
		return b + header
	}
	frames := (b + 8 + chunk - 1) / chunk
	return b + 8 + header*frames
}

// wantCost asserts exact per-party stream costs: rounds and bytes sent.
func wantCost[T any](t testing.TB, r pairResult[T], rounds [2]int64, sent [2]int64) {
	t.Helper()
	for p := range 2 {
		if got := r.Stats[p].Rounds; got != rounds[p] {
			t.Errorf("party %d: %d rounds, want %d", p, got, rounds[p])
		}
		if got := r.Stats[p].BytesSent; got != sent[p] {
			t.Errorf("party %d: sent %d bytes, want %d", p, got, sent[p])
		}
	}
}

// chiSquareBytes returns the chi-square statistic of the byte histogram of
// the words against the uniform distribution (255 degrees of freedom: mean
// 255, standard deviation about 22.6).
func chiSquareBytes(msgs [][]uint64) float64 {
	var hist [256]float64
	total := 0.0
	for _, m := range msgs {
		for _, w := range m {
			for i := 0; i < 8; i++ {
				hist[byte(w>>(8*i))]++
				total++
			}
		}
	}
	if total == 0 {
		return math.Inf(1)
	}
	exp := total / 256
	chi := 0.0
	for _, h := range hist {
		chi += (h - exp) * (h - exp) / exp
	}
	return chi
}

// chiSquareLimit is the acceptance bound for chiSquareBytes: the 99.99th
// percentile of the chi-square distribution with 255 degrees of freedom is
// about 346 (seeds are fixed, so a pass is reproducible).
const chiSquareLimit = 346

// checkViewHidesSecret asserts what party p received (msgs, protocol
// messages only) looks uniform (chi-square of the bytes) and holds none of
// the clear words of the secret.
func checkViewHidesSecret(t testing.TB, p int, msgs [][]uint64, clear map[uint64]bool) {
	t.Helper()
	if chi := chiSquareBytes(msgs); chi > chiSquareLimit {
		t.Errorf("party %d: chi-square %.1f > %d", p, chi, chiSquareLimit)
	}
	for _, m := range msgs {
		for _, w := range m {
			if clear[w] {
				t.Fatalf("party %d received a clear word %#x of the secret", p, w)
			}
		}
	}
}
