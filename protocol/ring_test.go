package protocol

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// ringOperands returns x (batch×m×k) and y (k×n) of signed integers whose
// products' values all lie strictly inside ±2^(ring−2), as 64-bit ring words,
// and the exact products: entries of x up to 2^a and of y up to 2^b with
// k·2^(a+b) < 2^(ring−2). The first entries of x are ±2^a (the extremes).
func ringOperands(ring uint, batch, m, k, n int, seed uint64) (x, y, xy *share.Tensor) {
	rng := rand.New(rand.NewPCG(seed, 7))
	lk := uint(0)
	for 1<<lk < k {
		lk++
	}
	a := (ring - 3 - lk) / 2
	b := ring - 3 - lk - a
	draw := func(bits uint) uint64 { return uint64(rng.Int64N(1<<(bits+1)+1) - 1<<bits) }
	x = &share.Tensor{Shape: []int{batch, m, k}, Data: make([]uint64, batch*m*k)}
	y = &share.Tensor{Shape: []int{k, n}, Data: make([]uint64, k*n)}
	for i := range x.Data {
		x.Data[i] = draw(a)
	}
	x.Data[0], x.Data[1%len(x.Data)] = 1<<a, -(uint64(1) << a)
	for i := range y.Data {
		y.Data[i] = draw(b)
	}
	xy = &share.Tensor{Shape: []int{batch, m, n}, Data: make([]uint64, batch*m*n)}
	_ = share.BatchMatMulInto(xy.Data, x.Data, y.Data, 1, batch*m, k, n)
	return x, y, xy
}

// TestMatMulRingTrunc: MatMulRing then TruncByRing (2 rounds, MatMul's and
// TruncBy's bytes) and MatMulRing then TruncReLURing (8 rounds) return
// floor(x·y/2^f) (+1), and its ReLU, as 64-bit shares, for products inside
// ±2^(ℓ−2); MatMulRing's own output is x·y mod 2^ℓ with every word below
// 2^ℓ.
func TestMatMulRingTrunc(t *testing.T) {
	const batch, m, k, n = 2, 3, 20, 5
	for _, ring := range []uint{40, 48, 54} {
		for _, f := range []uint{8, 16, 30} {
			t.Run(fmt.Sprintf("ℓ=%d/f=%d", ring, f), func(t *testing.T) {
				x, y, xy := ringOperands(ring, batch, m, k, n, uint64(ring*100+f))
				xsh, ysh := splitTensor(x, 3), splitTensor(y, 4)
				mask := ringMask(ring)
				for _, relu := range []bool{false, true} {
					r := runPair(t, func(ctx context.Context, s *Session) ([2]*share.Tensor, error) {
						z, err := s.MatMulRing(ctx, pickShare(s, xsh), pickShare(s, ysh), ring)
						if err != nil {
							return [2]*share.Tensor{}, err
						}
						zc := z.Clone()
						var out *share.Tensor
						if relu {
							out, err = s.TruncReLURing(ctx, z, f, ring)
						} else {
							out, err = s.TruncByRing(ctx, z, f, ring)
						}
						return [2]*share.Tensor{zc, out}, err
					})
					for p := range 2 {
						for _, v := range r.Out[p][0].Data {
							if v&^mask != 0 {
								t.Fatalf("party %d: product share %#x above 2^%d", p, v, ring)
							}
						}
					}
					prod := openPair(t, [2]*share.Tensor{r.Out[0][0], r.Out[1][0]})
					got := openPair(t, [2]*share.Tensor{r.Out[0][1], r.Out[1][1]})
					for i, v := range xy.Data {
						if (prod.Data[i]-v)&mask != 0 {
							t.Fatalf("product %d: %#x, want %#x mod 2^%d", i, prod.Data[i], v&mask, ring)
						}
						want := floorShift(v, f)
						if relu && int64(want) < 0 {
							want = 0
						}
						if d := got.Data[i] - want; d > 1 || relu && int64(v) < 0 && got.Data[i] != 0 {
							t.Fatalf("relu %v, x·y = %d: got %d, want %d (+1)", relu, int64(v), int64(got.Data[i]), int64(want))
						}
					}
					c := MatMulRingCost(x.Len(), y.Len(), ring)
					if ring == 64 && c.Bytes != MessageBytes(x.Len()+y.Len()) {
						t.Fatalf("MatMulRingCost at 64 bits: %d bytes, MatMul's %d", c.Bytes, MessageBytes(x.Len()+y.Len()))
					}
					if relu {
						c = c.Plus(TruncReLURingCost(xy.Len(), ring))
						if c.Rounds != 8 {
							t.Fatalf("TruncReLURingCost: %d rounds with the product, want 8", c.Rounds)
						}
					} else {
						c = c.Plus(TruncCost(xy.Len()))
					}
					wantCost(t, r, [2]int64{c.Rounds, c.Rounds}, [2]int64{c.Bytes, c.Bytes})
				}
			})
		}
	}
}

// TestTruncByRingEdges: TruncByRing and TruncReLURing on values at and near
// both ends of [−2^(ℓ−2), 2^(ℓ−2)), shared mod 2^ℓ with uniform shares (and
// with stray high bits in the shares, which are ignored), for several ℓ
// and f; ℓ = 64 is TruncBy.
func TestTruncByRingEdges(t *testing.T) {
	for _, ring := range []uint{6, 20, 40, 48, 54, 63, 64} {
		for _, f := range []uint{1, ring / 3, ring - 2} {
			t.Run(fmt.Sprintf("ℓ=%d/f=%d", ring, f), func(t *testing.T) {
				lim := int64(1) << (ring - 2)
				vals := []int64{0, 1, -1, lim - 1, -lim, lim - 2, -lim + 1, lim / 3, -lim / 3}
				rng := rand.New(rand.NewPCG(uint64(ring), uint64(f)))
				for range 200 {
					vals = append(vals, rng.Int64N(lim)-rng.Int64N(lim))
				}
				x := &share.Tensor{Shape: []int{len(vals)}, Data: make([]uint64, len(vals))}
				for i, v := range vals {
					x.Data[i] = uint64(v)
				}
				xsh := splitTensor(x, 9)
				mask := ringMask(ring)
				for p := range 2 {
					for i := range xsh[p].Data {
						// Shares mod 2^ℓ, then high garbage the protocol must ignore.
						xsh[p].Data[i] = xsh[p].Data[i]&mask | rng.Uint64()&^mask
					}
				}
				if (xsh[0].Data[0]+xsh[1].Data[0])&mask != 0 {
					t.Fatal("bad sharing")
				}
				wantRelu := ring%2 == 0
				r := runPair(t, func(ctx context.Context, s *Session) ([2]*share.Tensor, error) {
					a, err := s.TruncByRing(ctx, pickShare(s, xsh), f, ring)
					if err != nil || !wantRelu {
						return [2]*share.Tensor{a, a}, err
					}
					b, err := s.TruncReLURing(ctx, pickShare(s, xsh), f, ring)
					return [2]*share.Tensor{a, b}, err
				})
				tr := openPair(t, [2]*share.Tensor{r.Out[0][0], r.Out[1][0]})
				re := openPair(t, [2]*share.Tensor{r.Out[0][1], r.Out[1][1]})
				for i, v := range vals {
					want := uint64(v >> f)
					if d := tr.Data[i] - want; d > 1 {
						t.Fatalf("trunc x=%d: got %d, want %d (+1)", v, int64(tr.Data[i]), int64(want))
					}
					if !wantRelu {
						continue
					}
					if v < 0 && re.Data[i] != 0 || v >= 0 && re.Data[i] != tr.Data[i] {
						t.Fatalf("trunc relu x=%d: got %d, truncation %d", v, int64(re.Data[i]), int64(tr.Data[i]))
					}
				}
			})
		}
	}
}

// TestSignCircuitEvenWidths: the sign circuit on every even width w of
// 2..64 returns bit w−1 of x mod 2^w, in the rounds and bytes of its
// layout (SignCircuitWords(w)).
func TestSignCircuitEvenWidths(t *testing.T) {
	const n = 130
	rng := rand.New(rand.NewPCG(5, 5))
	x := &share.Tensor{Shape: []int{n}, Data: make([]uint64, n)}
	for i := range x.Data {
		x.Data[i] = rng.Uint64()
	}
	xsh := splitTensor(x, 2)
	for w := 2; w <= 64; w += 2 {
		r := runPair(t, func(ctx context.Context, s *Session) ([]uint64, error) {
			return s.msbBitsWith(ctx, pickShare(s, xsh).Data, w, nil, nil)
		})
		for i, v := range x.Data {
			got := (r.Out[0][i>>6] ^ r.Out[1][i>>6]) >> (i & 63) & 1
			if want := v >> (w - 1) & 1; got != want {
				t.Fatalf("width %d element %d: bit %d, want %d", w, i, got, want)
			}
		}
		c := signCost(n, w, 0)
		if want := int64(len(signCircuit(w).words())); c.Rounds != want {
			t.Fatalf("width %d: %d rounds, layout %d", w, c.Rounds, want)
		}
		wantCost(t, r, [2]int64{c.Rounds, c.Rounds}, [2]int64{c.Bytes, c.Bytes})
	}
	if got := SignCircuitWords(54); fmt.Sprint(got) != "[131 50 26 10 6 2]" {
		t.Fatalf("SignCircuitWords(54) = %v", got)
	}
}

// TestMatMulRingView: what a party receives in MatMulRing is uniform mod
// 2^ℓ whatever x is: the message is the openings packed at ℓ bits (the high
// bits, which would carry the sign of a small X, are never sent), and its
// bytes are uniform both for an X of small positive and of small negative
// entries.
func TestMatMulRingView(t *testing.T) {
	const ring = 48
	const m, k, n = 64, 64, 64
	for _, sign := range []int64{1, -1} {
		t.Run(fmt.Sprint("sign ", sign), func(t *testing.T) {
			x := &share.Tensor{Shape: []int{m, k}, Data: make([]uint64, m*k)}
			y := &share.Tensor{Shape: []int{k, n}, Data: make([]uint64, k*n)}
			for i := range x.Data {
				x.Data[i] = uint64(sign * int64(1+i%5))
				y.Data[i] = uint64(sign * 3)
			}
			xsh, ysh := splitTensor(x, 6), splitTensor(y, 7)
			r := runPairWith(t, pairConfig{Record: true, Seed: 3}, func(ctx context.Context, s *Session) (*share.Tensor, error) {
				return s.MatMulRing(ctx, pickShare(s, xsh), pickShare(s, ysh), ring)
			})
			for p := range 2 {
				if len(r.Recv[p]) != 1 || len(r.Recv[p][0]) != share.FieldWords(m*k+k*n, ring) {
					t.Fatalf("party %d received %d messages, want one of %d words", p, len(r.Recv[p]), share.FieldWords(m*k+k*n, ring))
				}
				if chi := chiSquareBytes(r.Recv[p]); chi > chiSquareLimit {
					t.Errorf("party %d: chi-square %.1f > %d", p, chi, chiSquareLimit)
				}
			}
		})
	}
}

// TestRingBadInput: widths and shifts out of range are errors, with nothing
// sent.
func TestRingBadInput(t *testing.T) {
	x := &share.Tensor{Shape: []int{1, 1}, Data: []uint64{1}}
	tests := []struct {
		name string
		call func(ctx context.Context, s *Session) error
	}{
		{"matmul ℓ=1", func(ctx context.Context, s *Session) error { _, err := s.MatMulRing(ctx, x, x, 1); return err }},
		{"matmul ℓ=65", func(ctx context.Context, s *Session) error { _, err := s.MatMulRing(ctx, x, x, 65); return err }},
		{"trunc ℓ=2", func(ctx context.Context, s *Session) error { _, err := s.TruncByRing(ctx, x, 1, 2); return err }},
		{"trunc f=ℓ−1", func(ctx context.Context, s *Session) error { _, err := s.TruncByRing(ctx, x, 39, 40); return err }},
		{"trunc f=0", func(ctx context.Context, s *Session) error { _, err := s.TruncByRing(ctx, x, 0, 40); return err }},
		{"trunc ℓ=70", func(ctx context.Context, s *Session) error { _, err := s.TruncByRing(ctx, x, 16, 70); return err }},
		{"relu odd ℓ", func(ctx context.Context, s *Session) error { _, err := s.TruncReLURing(ctx, x, 16, 41); return err }},
		{"relu f=ℓ−1", func(ctx context.Context, s *Session) error { _, err := s.TruncReLURing(ctx, x, 39, 40); return err }},
		{"relu nil", func(ctx context.Context, s *Session) error { _, err := s.TruncReLURing(ctx, nil, 16, 40); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runPair(t, func(ctx context.Context, s *Session) (error, error) { return tc.call(ctx, s), nil })
			for p := range 2 {
				if r.Out[p] == nil {
					t.Errorf("party %d: no error", p)
				}
				if r.Stats[p].BytesSent != 0 {
					t.Errorf("party %d sent %d bytes", p, r.Stats[p].BytesSent)
				}
			}
		})
	}
}

// squareKeepOperands returns x and y (n elements, signed ring integers) whose
// squares x² and products x·y all lie inside [−2^(ring−2), 2^(ring−2)), with
// the bound's ends first: the largest x² (x = ±(⌊√(2^(ring−2) − 1)⌋)),
// x·y = 2^(ring−2) − 1, −(2^(ring−2) − 1) and −2^(ring−2) exactly, and
// zero; then uniform x up to 2^a and y up to 2^b, 2a ≤ ring − 3 and
// a + b = ring − 3.
func squareKeepOperands(ring uint, n int, seed uint64) (x, y *share.Tensor) {
	rng := rand.New(rand.NewPCG(seed, 11))
	lim := int64(1) << (ring - 2)
	root := int64(math.Sqrt(float64(lim - 1)))
	for root*root >= lim {
		root--
	}
	for (root+1)*(root+1) < lim {
		root++
	}
	a := (ring - 3) / 2
	b := ring - 3 - a
	h := a // x = ±2^h, y = ∓2^(ring−2−h): x·y = −2^(ring−2)
	edges := [][2]int64{{root, 1}, {-root, -1}, {1, lim - 1}, {-1, lim - 1}, {1 << h, -(lim >> h)}, {-(1 << h), lim >> h}, {0, 0}, {0, lim - 1}}
	x = &share.Tensor{Shape: []int{n}, Data: make([]uint64, n)}
	y = &share.Tensor{Shape: []int{n}, Data: make([]uint64, n)}
	draw := func(bits uint) int64 { return rng.Int64N(1<<(bits+1)+1) - 1<<bits }
	for i := range n {
		xv, yv := draw(a), draw(b)
		if i < len(edges) {
			xv, yv = edges[i][0], edges[i][1]
		}
		x.Data[i], y.Data[i] = uint64(xv), uint64(yv)
	}
	return x, y
}

// TestSquareKeepRingTrunc: SquareKeepRing, its KeptOpening's Mul and a
// TruncByRing of each (the LayerNorm's pattern) return x² and x·y mod 2^ℓ,
// every word below 2^ℓ, and floor(x²/2^f) and floor(x·y/2^f) (+1) as 64-bit
// shares, for values up to the bound's ends; 4 rounds and
// 2·SquareKeepRingCost(n, ℓ) + 2·TruncCost(n) bytes per party exactly (at
// ℓ = 64 SquareKeep's msg(n) + msg(n)).
func TestSquareKeepRingTrunc(t *testing.T) {
	const n = 300
	for _, ring := range []uint{20, 41, 50, 54, 63, 64} {
		for _, f := range []uint{8, 16} {
			t.Run(fmt.Sprintf("ℓ=%d/f=%d", ring, f), func(t *testing.T) {
				x, y := squareKeepOperands(ring, n, uint64(ring*100+f))
				xsh, ysh := splitTensor(x, 13), splitTensor(y, 14)
				mask := ringMask(ring)
				r := runPair(t, func(ctx context.Context, s *Session) ([4]*share.Tensor, error) {
					sq, k, err := s.SquareKeepRing(ctx, pickShare(s, xsh), ring)
					if err != nil {
						return [4]*share.Tensor{}, err
					}
					prod, err := k.Mul(ctx, s, pickShare(s, ysh))
					if err != nil {
						return [4]*share.Tensor{}, err
					}
					sqc, prodc := sq.Clone(), prod.Clone()
					tsq, err := s.TruncByRing(ctx, sq, f, ring)
					if err != nil {
						return [4]*share.Tensor{}, err
					}
					tprod, err := s.TruncByRing(ctx, prod, f, ring)
					return [4]*share.Tensor{sqc, prodc, tsq, tprod}, err
				})
				for p := range 2 {
					for j := range 2 {
						for _, v := range r.Out[p][j].Data {
							if v&^mask != 0 {
								t.Fatalf("party %d: output %d share %#x above 2^%d", p, j, v, ring)
							}
						}
					}
				}
				var got [4]*share.Tensor
				for j := range got {
					got[j] = openPair(t, [2]*share.Tensor{r.Out[0][j], r.Out[1][j]})
				}
				for i := range n {
					xv, yv := x.Data[i], y.Data[i]
					for j, v := range []uint64{xv * xv, xv * yv} {
						if (got[j].Data[i]-v)&mask != 0 {
							t.Fatalf("element %d (x = %d, y = %d), product %d: %#x, want %#x mod 2^%d", i, int64(xv), int64(yv), j, got[j].Data[i], v&mask, ring)
						}
						if d := got[2+j].Data[i] - floorShift(v, f); d > 1 {
							t.Fatalf("element %d (x = %d, y = %d), truncated product %d: %d, want %d (+1)", i, int64(xv), int64(yv), j, int64(got[2+j].Data[i]), int64(floorShift(v, f)))
						}
					}
				}
				c := SquareKeepRingCost(n, ring)
				if ring == 64 && c.Bytes != wireBytes(n) {
					t.Fatalf("SquareKeepRingCost at 64 bits: %d bytes, SquareKeep's %d", c.Bytes, wireBytes(n))
				}
				c = c.Plus(c).Plus(TruncCost(n)).Plus(TruncCost(n))
				wantCost(t, r, [2]int64{c.Rounds, c.Rounds}, [2]int64{c.Bytes, c.Bytes})
				if c.Rounds != 4 {
					t.Fatalf("%d rounds, want 4", c.Rounds)
				}
			})
		}
	}
}

// TestSquareKeepRingView: what a party receives in SquareKeepRing and its
// Mul is two messages of the openings packed at ℓ bits (⌈nℓ/64⌉ words: the
// high bits, which would carry the sign of a small x, are never sent), each
// uniform (chi-square of the bytes) and holding no word of x or y, and
// their difference mod 2^ℓ is uniform too, for small x of either sign and
// for y = x (where a mask shared by the two openings would show as a zero
// difference).
func TestSquareKeepRingView(t *testing.T) {
	const ring = 50
	const n = 4096 // n·ℓ a multiple of 64: no padding bits in the messages
	for _, sign := range []int64{1, -1} {
		t.Run(fmt.Sprint("sign ", sign), func(t *testing.T) {
			x := &share.Tensor{Shape: []int{n}, Data: make([]uint64, n)}
			for i := range x.Data {
				x.Data[i] = uint64(sign * int64(1+i%7) << 16)
			}
			xsh := splitTensor(x, 15)
			r := runPairWith(t, pairConfig{Record: true, Seed: 8}, func(ctx context.Context, s *Session) (*share.Tensor, error) {
				_, k, err := s.SquareKeepRing(ctx, pickShare(s, xsh), ring)
				if err != nil {
					return nil, err
				}
				return k.Mul(ctx, s, pickShare(s, xsh))
			})
			clear := map[uint64]bool{}
			for _, v := range x.Data {
				clear[v], clear[v&ringMask(ring)] = true, true
			}
			w := share.FieldWords(n, ring)
			for p := range 2 {
				msgs := r.Recv[p]
				if len(msgs) != 2 || len(msgs[0]) != w || len(msgs[1]) != w {
					t.Fatalf("party %d received %d messages, want 2 of %d words", p, len(msgs), w)
				}
				checkViewHidesSecret(t, p, msgs, clear)
				e, f := make([]uint64, n), make([]uint64, n)
				share.UnpackFields(e, msgs[0], ring)
				share.UnpackFields(f, msgs[1], ring)
				for i := range e {
					if clear[e[i]] || clear[f[i]] {
						t.Fatalf("party %d: opening %d is a secret", p, i)
					}
					e[i] -= f[i]
				}
				diff := make([]uint64, w)
				share.PackFields(diff, e, ring)
				if chi := chiSquareBytes([][]uint64{diff}); chi > chiSquareLimit {
					t.Errorf("party %d: the openings' difference: chi-square %.1f > %d", p, chi, chiSquareLimit)
				}
			}
		})
	}
}

// TestSquareKeepRingBadInput: ring widths outside 2..64 and a nil x are
// errors, with nothing sent.
func TestSquareKeepRingBadInput(t *testing.T) {
	x := &share.Tensor{Shape: []int{2}, Data: []uint64{1, 2}}
	for _, tc := range []struct {
		name string
		x    *share.Tensor
		ring uint
	}{
		{"ℓ=0", x, 0}, {"ℓ=1", x, 1}, {"ℓ=65", x, 65}, {"ℓ=200", x, 200}, {"nil", nil, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPair(t, func(ctx context.Context, s *Session) (error, error) {
				_, k, err := s.SquareKeepRing(ctx, tc.x, tc.ring)
				if err == nil || k != nil {
					return fmt.Errorf("accepted (kept %v)", k != nil), nil
				}
				return err, nil
			})
			for p := range 2 {
				if r.Out[p] == nil || strings.Contains(r.Out[p].Error(), "accepted") {
					t.Errorf("party %d: %v", p, r.Out[p])
				}
				if r.Stats[p].BytesSent != 0 {
					t.Errorf("party %d sent %d bytes", p, r.Stats[p].BytesSent)
				}
			}
		})
	}
}
