package protocol

import (
	"context"
	"fmt"
	"slices"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
)

// MatMul returns this party's share of the ring product x·y of two shared
// tensors: x is [..., m, k] and y either [k, n] (one matrix for every leading
// index of x, treated as one (batch·m)×k product) or [..., k, n] with the same
// leading dimensions as x (a batched product, e.g. all heads and the whole
// batch of attention at once). No truncation (see MatMulFixed).
//
// Matrix triples: both parties open E = X − A and F = Y − B in ONE exchange
// (all batches together), then each computes X_i·F + E·B_i + C_i (two local
// GEMMs), which sums to (E+A)·F + E·B + A·B = X·Y.
//
// Cost: 1 round, msg(|x| + |y|) bytes per party (8(|x|+|y|) + framing).
func (s *Session) MatMul(ctx context.Context, x, y *share.Tensor) (*share.Tensor, error) {
	return s.matMulIn(ctx, x, y, 64)
}

// MatMulFixed returns this party's share of the fixed-point product x·y:
// MatMul followed by Trunc.
//
// Cost: 2 rounds, msg(|x|+|y|) + msg(⌈|out|/64⌉) bytes per party. Error: ≤ 1 ulp
// (when every partial sum stays inside the encoding's range).
func (s *Session) MatMulFixed(ctx context.Context, x, y *share.Tensor) (*share.Tensor, error) {
	z, err := s.MatMul(ctx, x, y)
	if err != nil {
		return nil, err
	}
	return s.Trunc(ctx, z)
}

// SetGEMM makes b run this session's local matrix products (MatMul,
// MatMulWeights and the protocols built on them); nil restores the
// process-wide backend of share.GEMM(). Backends compute the same exact ring
// products, so the choice changes neither results nor rounds and bytes. A
// rehearsal (NewRehearsal) keeps its own backend, which computes nothing.
func (s *Session) SetGEMM(b share.GEMMBackend) {
	if !s.dry {
		s.gemm = b
	}
}

// GEMM returns the backend that runs this session's local matrix products:
// the one SetGEMM installed, else share.GEMM() (which reports a backend
// forced by SELECTFORMER_GEMM that cannot open).
func (s *Session) GEMM() (share.GEMMBackend, error) {
	if s.gemm != nil {
		return s.gemm, nil
	}
	return share.GEMM()
}

// matmulShape checks the operands of MatMul and returns the batch (product of
// x's leading dims), m, k, n and the output shape.
func matmulShape(x, y *share.Tensor) (batch, m, k, n int, shape []int, err error) {
	rx, ry := x.Rank(), y.Rank()
	if rx < 2 || ry < 2 {
		return 0, 0, 0, 0, nil, fmt.Errorf("protocol: matmul of %v and %v: need rank ≥ 2", x.Shape, y.Shape)
	}
	m, k = x.Shape[rx-2], x.Shape[rx-1]
	k2 := y.Shape[ry-2]
	n = y.Shape[ry-1]
	if k != k2 {
		return 0, 0, 0, 0, nil, fmt.Errorf("protocol: matmul of %v and %v: inner dimensions %d and %d differ", x.Shape, y.Shape, k, k2)
	}
	if ry > 2 && !slices.Equal(x.Shape[:rx-2], y.Shape[:ry-2]) {
		return 0, 0, 0, 0, nil, fmt.Errorf("protocol: batched matmul of %v and %v: leading dimensions differ", x.Shape, y.Shape)
	}
	batch = 1
	for _, d := range x.Shape[:rx-2] {
		batch *= d
	}
	shape = append(slices.Clone(x.Shape[:rx-1]), n)
	return batch, m, k, n, shape, nil
}

// Weight is a matrix (k×n) or a vector (1×n) of the model owner's clear
// weights prepared for the weight-mask trick by ShareWeight or ShareVector:
// party 0 keeps W, party 1 keeps F = W − B, where B is party 0's reusable mask
// of weight id from the dealer. A Weight belongs to one party and may be used
// by any of that party's sessions (streams), concurrently.
//
// Security: each weight id must be shared once, with one W: two different
// matrices revealed under the same mask would leak their difference.
type Weight struct {
	id     uint64
	party  int
	k, n   int
	vector bool
	// A vector's words: party 0 the clear γ, party 1 γ − b.
	w []uint64 // party 0: the clear weights (fixed-point ring words)
	f []uint64 // party 1: W − B
	// A matrix's words (party 0 W, party 1 F = W − B) as the right operand
	// of the GEMM backend, which may keep them prepared (on a GPU) for as
	// long as the Weight lives.
	mat *share.WeightMatrix
}

// ID returns the weight's id (the dealer's key of its mask).
func (w *Weight) ID() uint64 { return w.id }

// Shape returns (k, n): the matrix is k×n, a vector 1×n.
func (w *Weight) Shape() (k, n int) { return w.k, w.n }

// ShareWeight prepares the model owner's clear k×n matrix w (row-major ring
// words, fixed-point encoded; party 1 passes nil) under id: party 0 asks the
// dealer for the mask B of id and sends F = W − B to party 1, once.
//
// Cost (once per weight matrix, not per product): 1 round, party 0 sends
// msg(k·n) bytes, party 1 nothing. Party 1 receives F, uniform because B is.
func (s *Session) ShareWeight(ctx context.Context, id uint64, w *share.Tensor, k, n int) (*Weight, error) {
	return s.shareWeight(ctx, id, w, k, n, false)
}

// ShareVector prepares the model owner's clear vector γ of n fixed-point ring
// words (party 1 passes nil) for MulPrivateVector, as ShareWeight does with a
// 1×n matrix. Cost: 1 round, party 0 sends msg(n) bytes, once.
func (s *Session) ShareVector(ctx context.Context, id uint64, gamma *share.Tensor, n int) (*Weight, error) {
	return s.shareWeight(ctx, id, gamma, 1, n, true)
}

func (s *Session) shareWeight(ctx context.Context, id uint64, w *share.Tensor, k, n int, vector bool) (*Weight, error) {
	if k <= 0 || n <= 0 {
		return nil, fmt.Errorf("protocol: share weight %d of shape %d×%d", id, k, n)
	}
	out := &Weight{id: id, party: s.party, k: k, n: n, vector: vector}
	if s.party == 0 {
		if w == nil || w.Len() != k*n {
			return nil, fmt.Errorf("protocol: share weight %d: model owner must pass a %d×%d tensor, got %v", id, k, n, w)
		}
		b, err := s.prov.WeightMask(ctx, id, k, n)
		if err != nil {
			return nil, fmt.Errorf("protocol: share weight %d: %w", id, err)
		}
		f := make([]uint64, k*n)
		_ = share.SubVec(f, w.Data, b)
		if err := s.SendWords(ctx, f); err != nil {
			return nil, fmt.Errorf("protocol: share weight %d: %w", id, err)
		}
		if vector {
			out.w = slices.Clone(w.Data)
			return out, nil
		}
		if out.mat, err = share.NewWeightMatrix(w.Data, k, n); err != nil {
			return nil, fmt.Errorf("protocol: share weight %d: %w", id, err)
		}
		return out, nil
	}
	if w != nil {
		return nil, fmt.Errorf("protocol: share weight %d: the data owner must not pass weights", id)
	}
	f := make([]uint64, k*n)
	if err := s.RecvWords(ctx, f); err != nil {
		return nil, fmt.Errorf("protocol: share weight %d: %w", id, err)
	}
	if vector {
		out.f = f
		return out, nil
	}
	mat, err := share.NewWeightMatrix(f, k, n)
	if err != nil {
		return nil, fmt.Errorf("protocol: share weight %d: %w", id, err)
	}
	out.mat = mat
	return out, nil
}

// MatMulWeights returns this party's share of the ring product x·W for a
// shared x of shape [..., k] and the model owner's matrix W (k×n) prepared by
// ShareWeight; the result is [..., n]. With m = |x|/k rows and a weight
// triple (party 1: mask A, m×k; both: shares C of A·B):
// party 1 sends E = X1 − A and computes A·F + C1; party 0 computes
// (X0 + E)·W + C0. The sum is (X − A)·W + A·(W − B) + A·B = X·W.
//
// Cost: 1 round, ONE direction: party 1 sends msg(m·k) bytes, party 0 sends
// nothing; one GEMM per party. Party 0 receives X1 − A, uniform because A is.
// No truncation (see MatMulWeightsFixed).
func (s *Session) MatMulWeights(ctx context.Context, x *share.Tensor, w *Weight) (*share.Tensor, error) {
	out, err := s.MatMulWeightsMany(ctx, []*share.Tensor{x}, []*Weight{w})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// MatMulWeightsMany returns this party's shares of the products xs[i]·ws[i]
// (each as MatMulWeights) in one round: party 1 sends the masked operands of
// every product as ONE message. Several products of different rows of the
// same input by different weights cost one round instead of several, e.g.
// the keys and values of every token together with the query of the class
// token alone.
//
// Cost: 1 round, one direction: party 1 sends msg(Σ m_i·k_i) bytes, party 0
// nothing; one weight triple per product. With a provider that makes weight
// triples inside the computation (beaver.WeightsOnline: the dealer-free
// provider with lattice encryption) party 1's mask is its own share X1 and
// its one message carries the triples' outputs instead (mulWeightsOnline).
func (s *Session) MatMulWeightsMany(ctx context.Context, xs []*share.Tensor, ws []*Weight) ([]*share.Tensor, error) {
	if len(xs) != len(ws) || len(xs) == 0 {
		return nil, fmt.Errorf("protocol: matmul by weights: %d operands for %d weights", len(xs), len(ws))
	}
	ps := make([]weightProduct, len(xs))
	total := 0
	for i, x := range xs {
		w := ws[i]
		if err := s.checkWeight(w, false); err != nil {
			return nil, err
		}
		if x == nil {
			return nil, fmt.Errorf("protocol: matmul nil by weight %d", w.id)
		}
		k, n := w.k, w.n
		if x.Rank() < 1 || x.Shape[x.Rank()-1] != k {
			return nil, fmt.Errorf("protocol: matmul %v by weight %d (%d×%d): last dimension must be %d", x.Shape, w.id, k, n, k)
		}
		m := x.Len() / k
		// The product is one m×k·k×n GEMM; the backend sees it as a batch of
		// rows×k blocks (candidates × tokens) that all share W.
		batch, rows := 1, m
		if r := x.Rank(); r >= 2 && x.Shape[r-2] > 0 {
			batch, rows = m/x.Shape[r-2], x.Shape[r-2]
		}
		ps[i] = weightProduct{m: m, k: k, n: n, batch: batch, rows: rows}
		total += m * k
	}
	g, err := s.GEMM()
	if err != nil {
		return nil, fmt.Errorf("protocol: matmul %v by weight %d: %w", xs[0].Shape, ws[0].id, err)
	}
	if wp := beaver.WeightsOnline(s.src); wp != nil || s.weightsOnline {
		return s.mulWeightsOnline(ctx, g, xs, ws, ps, wp)
	}
	for i := range ps {
		p := &ps[i]
		if p.wt, err = s.prov.WeightTriple(ctx, s.StreamID(), ws[i].id, p.m, p.k, p.n); err != nil {
			return nil, fmt.Errorf("protocol: matmul %v by weight %d: %w", xs[i].Shape, ws[i].id, err)
		}
	}
	// e holds the masked operands of every product, in order: party 1's
	// X1 − A, which party 0 turns into X0 + X1 − A.
	e := share.GetWords(total) // scratch: overwritten before use
	defer share.PutWords(e)
	off := 0
	for i, p := range ps {
		if s.party == 1 {
			_ = share.SubVec(e[off:off+p.m*p.k], xs[i].Data, p.wt.A)
		}
		off += p.m * p.k
	}
	if s.party == 1 {
		if err := s.SendWords(ctx, e); err != nil {
			return nil, fmt.Errorf("protocol: matmul %v by weight %d: %w", xs[0].Shape, ws[0].id, err)
		}
	} else if err := s.RecvWords(ctx, e); err != nil {
		return nil, fmt.Errorf("protocol: matmul %v by weight %d: %w", xs[0].Shape, ws[0].id, err)
	}
	outs := make([]*share.Tensor, len(ps))
	off = 0
	for i, p := range ps {
		x, w := xs[i], ws[i]
		shape := append(slices.Clone(x.Shape[:x.Rank()-1]), p.n)
		out := &share.Tensor{Shape: shape, Data: make([]uint64, p.m*p.n)}
		src := p.wt.A
		if s.party == 0 {
			src = e[off : off+p.m*p.k]
			_ = share.AddVec(src, src, x.Data)
		}
		off += p.m * p.k
		if err := g.MulWeights(out.Data, src, p.batch, p.rows, w.mat); err != nil {
			return nil, fmt.Errorf("protocol: matmul by weight %d on %s: %w", w.id, g.Name(), err)
		}
		_ = share.AddVec(out.Data, out.Data, p.wt.C)
		outs[i] = out
	}
	return outs, nil
}

// weightProduct is one product of MatMulWeightsMany: x (m×k, a batch of
// rows×k blocks) by a k×n weight, and its weight triple.
type weightProduct struct {
	m, k, n     int
	batch, rows int
	wt          beaver.WeightTriple
}

// onlineCounter marks the Counter of a weight triple made inside the
// computation (nextWeightItem), apart from every provider's own counters.
const onlineCounter uint64 = 1 << 63

// nextWeightItem returns the Counter of the session's next weight triple
// made inside the computation: the stream's provider position when the
// session began (an epoch's own, in a selection's lanes) plus the items
// before it, so that no two items of a provider session share a name.
func (s *Session) nextWeightItem() uint64 {
	c := onlineCounter | (s.onlineBase + s.online)
	s.online++
	return c
}

// mulWeightsOnline is MatMulWeightsMany with the weight triples made inside
// the computation (beaver.WeightProducer wp; nil in a rehearsal, which draws
// nothing): party 1's mask of each product is its own share X1, so it sends
// no masked operand X1 − A but ONE message of every product's outputs
// (WeightProduct.Words words each, public), which party 0 checks before it
// uses its shares. Party 1's result is X1·F + C1, party 0's X0·W + C0: their
// sum is X0·W + X1·(W − B) + X1·B = X·W.
//
// Cost: 1 round, one direction, as MatMulWeightsMany's, and no weight
// triple drawn: party 1 sends Σ Words words where it sent msg(Σ m_i·k_i) and
// the provider's stream carried the same outputs. What party 0 receives is
// what the provider's item would send it; what it learns from it is
// unchanged (beaver/ot's he_online.go).
func (s *Session) mulWeightsOnline(ctx context.Context, g share.GEMMBackend, xs []*share.Tensor, ws []*Weight, ps []weightProduct, wp beaver.WeightProducer) ([]*share.Tensor, error) {
	fail := func(err error) ([]*share.Tensor, error) {
		return nil, fmt.Errorf("protocol: matmul %v by weight %d: %w", xs[0].Shape, ws[0].id, err)
	}
	cs := make([][]uint64, len(ps))
	if !s.dry {
		items := make([]beaver.WeightProduct, len(ps))
		total := 0
		for i, p := range ps {
			r := beaver.Request{Kind: beaver.KindWeightTriple, Stream: s.StreamID(), Counter: s.nextWeightItem(), WeightID: ws[i].id, M: p.m, K: p.k, N: p.n}
			it, err := wp.WeightProduct(ctx, r)
			if err != nil {
				return fail(err)
			}
			items[i] = it
			total += it.Words()
		}
		msg := share.GetWords(total) // scratch: written whole (party 1) or received whole
		defer share.PutWords(msg)
		if s.party == 1 {
			// The model owner's encryptions come from its upload service:
			// a wait for the peer, so the compute slot goes back.
			s.waitStart()
			var err error
			for _, it := range items {
				if err = it.Await(ctx); err != nil {
					break
				}
			}
			if err := s.waitEnd(ctx, err); err != nil {
				return fail(err)
			}
			off := 0
			for i, it := range items {
				m, c, err := it.Outputs(ctx, xs[i].Data)
				if err != nil {
					return fail(err)
				}
				off += copy(msg[off:], m)
				cs[i] = c
			}
			if err := s.SendWords(ctx, msg); err != nil {
				return fail(err)
			}
		} else {
			wctx, stop := items[0].Watch(ctx)
			err := s.RecvWords(wctx, msg)
			stop()
			if err != nil {
				if cause := context.Cause(wctx); ctx.Err() == nil && cause != nil {
					err = cause // the provider can no longer serve the items: say why
				}
				return fail(err)
			}
			off := 0
			for i, it := range items {
				c, err := it.Accept(msg[off : off+it.Words()])
				if err != nil {
					return fail(err)
				}
				off += it.Words()
				cs[i] = c
			}
		}
	}
	outs := make([]*share.Tensor, len(ps))
	for i, p := range ps {
		x, w := xs[i], ws[i]
		shape := append(slices.Clone(x.Shape[:x.Rank()-1]), p.n)
		out := &share.Tensor{Shape: shape, Data: make([]uint64, p.m*p.n)}
		if err := g.MulWeights(out.Data, x.Data, p.batch, p.rows, w.mat); err != nil {
			return nil, fmt.Errorf("protocol: matmul by weight %d on %s: %w", w.id, g.Name(), err)
		}
		if cs[i] != nil {
			_ = share.AddVec(out.Data, out.Data, cs[i])
		}
		outs[i] = out
	}
	return outs, nil
}

// MatMulWeightsFixed is MatMulWeights followed by Trunc: the fixed-point
// product x·W.
//
// Cost: 2 rounds; party 1 sends msg(m·k) + msg(⌈m·n/64⌉), party 0
// msg(⌈m·n/64⌉).
// Error: ≤ 1 ulp (partial sums inside the range).
func (s *Session) MatMulWeightsFixed(ctx context.Context, x *share.Tensor, w *Weight) (*share.Tensor, error) {
	z, err := s.MatMulWeights(ctx, x, w)
	if err != nil {
		return nil, err
	}
	return s.Trunc(ctx, z)
}

// MulPrivateVector returns this party's share of the ring product x ⊙ γ for a
// shared x of shape [..., n] and the model owner's vector γ (n, broadcast over
// the leading dimensions) prepared by ShareVector — LayerNorm's scale.
// The same trick as MatMulWeights with a dedicated correlation (a mask A of
// x's shape for party 1, shares of A ⊙ b): party 1 sends E = X1 − A, party 0
// computes (X0 + E) ⊙ γ + C0, party 1 A ⊙ F + C1.
//
// Cost: 1 round, one direction: party 1 sends msg(|x|) bytes, party 0 nothing.
// No truncation (see MulPrivateVectorFixed).
func (s *Session) MulPrivateVector(ctx context.Context, x *share.Tensor, gamma *Weight) (*share.Tensor, error) {
	if err := s.checkWeight(gamma, true); err != nil {
		return nil, err
	}
	n := gamma.n
	if x.Rank() < 1 || x.Shape[x.Rank()-1] != n {
		return nil, fmt.Errorf("protocol: multiply %v by private vector %d of length %d: last dimension differs", x.Shape, gamma.id, n)
	}
	m := x.Len() / n
	wt, err := s.prov.WeightVectorTriple(ctx, s.StreamID(), gamma.id, m, n)
	if err != nil {
		return nil, fmt.Errorf("protocol: multiply %v by private vector %d: %w", x.Shape, gamma.id, err)
	}
	out := &share.Tensor{Shape: slices.Clone(x.Shape), Data: make([]uint64, m*n)}
	var src, vec []uint64
	if s.party == 1 {
		e := make([]uint64, m*n)
		_ = share.SubVec(e, x.Data, wt.A)
		if err := s.SendWords(ctx, e); err != nil {
			return nil, fmt.Errorf("protocol: multiply %v by private vector %d: %w", x.Shape, gamma.id, err)
		}
		src, vec = wt.A, gamma.f
	} else {
		e := make([]uint64, m*n)
		if err := s.RecvWords(ctx, e); err != nil {
			return nil, fmt.Errorf("protocol: multiply %v by private vector %d: %w", x.Shape, gamma.id, err)
		}
		_ = share.AddVec(e, e, x.Data)
		src, vec = e, gamma.w
	}
	for r := 0; r < m; r++ {
		row := out.Data[r*n : (r+1)*n]
		in := src[r*n : (r+1)*n]
		c := wt.C[r*n : (r+1)*n]
		for j, v := range vec {
			row[j] = in[j]*v + c[j]
		}
	}
	return out, nil
}

// MulPrivateVectorFixed is MulPrivateVector followed by Trunc.
//
// Cost: 2 rounds; party 1 sends msg(|x|) + msg(⌈|x|/64⌉), party 0
// msg(⌈|x|/64⌉). Error: ≤ 1 ulp.
func (s *Session) MulPrivateVectorFixed(ctx context.Context, x *share.Tensor, gamma *Weight) (*share.Tensor, error) {
	z, err := s.MulPrivateVector(ctx, x, gamma)
	if err != nil {
		return nil, err
	}
	return s.Trunc(ctx, z)
}

func (s *Session) checkWeight(w *Weight, vector bool) error {
	switch {
	case w == nil:
		return fmt.Errorf("protocol: nil weight")
	case w.party != s.party:
		return fmt.Errorf("protocol: weight %d belongs to party %d, used by party %d", w.id, w.party, s.party)
	case w.vector != vector && vector:
		return fmt.Errorf("protocol: weight %d is a matrix, not a vector shared by ShareVector", w.id)
	case w.vector != vector:
		return fmt.Errorf("protocol: weight %d is a vector, not a matrix shared by ShareWeight", w.id)
	}
	return nil
}
