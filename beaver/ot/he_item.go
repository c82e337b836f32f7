package ot

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/he"
)

// One weight-mask item of a Lattice: its public plan, party 0's and party
// 1's sides of the protocol (he.go), the uploads and their loading, and
// the hashes that bind the check to the session and the item.

// Generate implements WeightMaskGenerator: this party's parts of the
// weight-mask item with HE on generator g (see the protocol above): party 0
// (nil, C0), party 1 (A, C1).
func (h *Lattice) Generate(ctx context.Context, g *Gen, item Item) ([][]uint64, error) {
	r, sid := item.Request, item.Session
	what := fmt.Sprintf("he %v", r.Kind)
	it, err := h.item(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := g.begin(ctx, what); err != nil {
		return nil, err
	}
	var ps [][]uint64
	if item.Party == 0 {
		ps, err = h.party0(ctx, g, sid, it, item.WeightMask)
	} else {
		ps, err = h.party1(ctx, g, sid, it)
	}
	if err == nil {
		h.mu.Lock()
		h.stats.Items++
		h.mu.Unlock()
	}
	return ps, g.end(what, err)
}

// item returns the public plan of the weight-mask item r.
func (h *Lattice) item(r beaver.Request) (*heItem, error) {
	m, k, n := r.M, r.K, r.N
	if r.Kind == beaver.KindWeightVectorTriple {
		k = n // A ⊙ b = A·diag(b)
	}
	if k > h.sc.Params().MaxInner {
		return nil, fmt.Errorf("inner dimension %d above the HE parameters' MaxInner %d", k, h.sc.Params().MaxInner)
	}
	if _, err := checkSize("he", m, k); err != nil {
		return nil, err
	}
	if _, err := checkSize("he", m, n+he.CheckColumns); err != nil {
		return nil, err
	}
	plan, err := h.sc.PlanChecked(m, k, n)
	if err != nil {
		return nil, err
	}
	it := &heItem{r: r, m: m, k: k, n: n, plan: plan, out: h.sc.OutputSizes(plan)}
	for _, o := range plan.Outputs {
		for _, t := range o.Terms {
			key := heKey{matrix: t.Matrix, kind: r.Kind, id: r.WeightID, k: k, n: n, off: t.Off, nw: o.Layout.NW, kw: max(o.Layout.KW, 1)}
			if t.Matrix == he.MatrixProj { // V is shared by every weight with n columns
				key.kind, key.id, key.k, key.row0, key.row1 = 0, 0, 0, t.Row0, t.Row1
			}
			rows, cols := plan.TermShape(t)
			it.terms = append(it.terms, heTerm{key: key, t: t, l: o.Layout, rows: rows, cols: cols})
		}
	}
	return it, nil
}

// weightMask returns party 0's mask B of the item (k×n; diag(b) for
// KindWeightVectorTriple) from its weight masks (Item.WeightMask).
func (it *heItem) weightMask(mask func(k, n int) []uint64) []uint64 {
	if it.r.Kind != beaver.KindWeightVectorTriple {
		return mask(it.k, it.n)
	}
	b := mask(1, it.n)
	B := make([]uint64, it.n*it.n)
	for j, v := range b {
		B[j*it.n+j] = v
	}
	return B
}

// party0 is party 0's side of one item; mask gives its weight masks. It
// registers the item's keys for upload (need), then waits for party 1's
// outputs, or for the upload service's failure.
func (h *Lattice) party0(ctx context.Context, g *Gen, sid beaver.SessionID, it *heItem, mask func(k, n int) []uint64) ([][]uint64, error) {
	if err := h.err(); err != nil {
		return nil, fmt.Errorf("the HE key was discarded after a failed check: %w", err)
	}
	h.need(sid, it, mask)
	wctx, stop := h.watch(ctx)
	defer stop()
	msg, err := g.exchange(wctx, nil, it.words())
	if err != nil {
		if cause := context.Cause(wctx); ctx.Err() == nil && cause != nil {
			err = cause // the upload service failed: say why
		}
		return nil, fmt.Errorf("receive outputs: %w", err)
	}
	C0, err := h.accept(sid, it, msg)
	if err != nil {
		return nil, err
	}
	return parts(nil, C0), nil
}

// watch returns ctx, also ended when the upload service fails (with its
// failure as the cause): party 0 waits for party 1's outputs with it,
// since party 1 may be waiting for an encryption that will not come.
func (h *Lattice) watch(ctx context.Context) (context.Context, func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(h.upFailed, func() { cancel(context.Cause(h.upFailed)) })
	return wctx, func() { stop(); cancel(nil) }
}

// words returns the size of party 1's message of the item: the tag, its
// outputs and its commitment.
func (it *heItem) words() int {
	total := 1 + heCommitWords
	for _, b := range it.out {
		total += wordsFor(b)
	}
	return total
}

// accept is party 0's check of party 1's message of the item (it.words()
// words): it decrypts the outputs, checks them against its projections and
// party 1's commitment, and returns its share C0 of A·B. A failed check
// discards the HE key (fail): the error wraps beaver.ErrCorrelationCheck.
func (h *Lattice) accept(sid beaver.SessionID, it *heItem, msg []uint64) ([]uint64, error) {
	if len(msg) != it.words() {
		return nil, fmt.Errorf("outputs message of %d words, want %d: %w", len(msg), it.words(), he.ErrMalformed)
	}
	if msg[0] != heOutputs {
		return nil, fmt.Errorf("outputs message tagged %#x: %w", msg[0], he.ErrMalformed)
	}
	msg = msg[1:]
	h.mu.Lock()
	sk := h.sk
	h.mu.Unlock()
	if sk == nil {
		return nil, fmt.Errorf("the HE key was discarded after a failed check: %w", h.err())
	}
	V := h.projection(it.n)
	dec := make([][]uint64, len(it.out))
	var rho []uint64
	for i, o := range it.plan.Outputs {
		nw := wordsFor(it.out[i])
		ob, err := wordsToBytesExact(msg[:nw], it.out[i])
		if err != nil {
			return nil, fmt.Errorf("output %d: %w", i, err)
		}
		msg = msg[nw:]
		if i == 0 {
			rho = it.plan.Rho(heRowSeed(sid, it, ob))
		}
		out, err := h.sc.DecodeOutput(ob, o.Rows, o.Width)
		if err != nil {
			return nil, fmt.Errorf("output %d: %w", i, err)
		}
		if dec[i], err = h.sc.DecryptShares(sk, out, o.Rows, o.Width, o.Layout); err != nil {
			return nil, fmt.Errorf("output %d: %w", i, err)
		}
	}
	C0, res, err := it.plan.Residual(dec, V, rho)
	if err != nil {
		return nil, err
	}
	if got := heCommit(sid, it, res); got != [heCommitWords]uint64(msg) {
		err := fmt.Errorf("weight %d (%d×%d·%d×%d): the outputs' check failed: %w", it.r.WeightID, it.m, it.k, it.k, it.n, beaver.ErrCorrelationCheck)
		h.fail(err)
		return nil, err
	}
	return C0, nil
}

// count records an upload of size bytes, loaded into w by party 1 (nil
// for party 0).
func (h *Lattice) count(key heKey, size int64, w *he.Weights) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w != nil {
		h.stats.HeldBytes += w.Bytes()
		h.stats.PeakHeldBytes = max(h.stats.PeakHeldBytes, h.stats.HeldBytes)
	}
	if key.matrix == he.MatrixProj {
		h.stats.Projections++
	} else {
		h.stats.Uploads++
	}
	h.stats.UploadBytes += size
}

// heRowSeed is the seed of the challenge ρ of a compressed check
// (he.CheckedPlan.Rho): a hash of party 1's product output, bound to the
// session and the item, so that the output, and any error in it, is fixed
// before ρ is known (Fiat–Shamir).
func heRowSeed(sid beaver.SessionID, it *heItem, out0 []byte) [he.SeedSize]byte {
	h := sha256.New()
	h.Write(heItemBytes("selectformer/beaver/ot/he/rows/v1/", sid, it))
	h.Write(out0)
	return [he.SeedSize]byte(h.Sum(nil))
}

// heItemBytes is a domain, the session id and the item's identity.
func heItemBytes(domain string, sid beaver.SessionID, it *heItem) []byte {
	b := append([]byte(domain), sid[:]...)
	for _, v := range []uint64{uint64(it.r.Kind), it.r.WeightID, uint64(it.r.Stream), it.r.Counter, uint64(it.m), uint64(it.k), uint64(it.n)} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

// heCommit is party 1's commitment to its check masks' sum R1 (m×c), bound
// to the session and the item.
func heCommit(sid beaver.SessionID, it *heItem, R1 []uint64) [heCommitWords]uint64 {
	b := heItemBytes("selectformer/beaver/ot/he/check/v1/", sid, it)
	for _, v := range R1 {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	sum := sha256.Sum256(b)
	var w [heCommitWords]uint64
	for i := range w {
		w[i] = binary.LittleEndian.Uint64(sum[8*i:])
	}
	return w
}

// party1 is party 1's side of one item: it draws its mask A and its
// share R, and sends its outputs (outputs).
func (h *Lattice) party1(ctx context.Context, g *Gen, sid beaver.SessionID, it *heItem) ([][]uint64, error) {
	draw := g.draw
	if h.draw != nil {
		draw = h.draw
	}
	A := draw(it.m * it.k)
	R := draw(it.m * it.n)
	msg, err := h.outputs(ctx, sid, it, A, R, draw)
	if err != nil {
		return nil, err
	}
	if _, err := g.exchange(ctx, msg, 0); err != nil {
		return nil, fmt.Errorf("send outputs: %w", err)
	}
	// For KindWeightVectorTriple A is m×n and A·diag(b) = A ⊙ b.
	return parts(A, R), nil
}

// await is party 1's wait for the item's encryptions: it asks for those it
// neither holds nor asked for and waits until it holds them all. A wait
// for the peer's upload service; at once when they are held.
func (h *Lattice) await(ctx context.Context, sid beaver.SessionID, it *heItem) ([]*heEntry, error) {
	entries := make([]*heEntry, len(it.terms))
	var ask []heKey
	h.mu.Lock()
	if err := h.upErr; err != nil {
		h.mu.Unlock()
		return nil, err
	}
	for i, t := range it.terms {
		e := h.cache[t.key]
		if e == nil {
			e = &heEntry{done: make(chan struct{}), pending: true, sid: sid, term: t}
			h.cache[t.key] = e
			ask = append(ask, t.key)
		}
		entries[i] = e
	}
	h.mu.Unlock()
	h.ask(ask)
	for i, e := range entries {
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for %v: %w", it.terms[i].key, ctx.Err())
		}
		if e.err != nil {
			return nil, fmt.Errorf("%v: %w", it.terms[i].key, e.err)
		}
	}
	return entries, nil
}

// outputs returns party 1's message of the item (it.words() words) for its
// mask A (m×k; m×n for KindWeightVectorTriple) and its share R (m×n) of
// A·B, with check masks from draw: the tag, the checked product's outputs
// and the commitment to its check masks' sum. It waits for the item's
// encryptions first (await).
func (h *Lattice) outputs(ctx context.Context, sid beaver.SessionID, it *heItem, A, R []uint64, draw func(int) []uint64) ([]uint64, error) {
	entries, err := h.await(ctx, sid, it)
	if err != nil {
		return nil, err
	}
	masks, R1 := it.plan.Masks(R, draw)
	msg := make([]uint64, 1, it.words())
	msg[0] = heOutputs
	var rho []uint64
	ti := 0
	for o, out := range it.plan.Outputs {
		terms := make([]he.Term, len(out.Terms))
		for j, t := range out.Terms {
			terms[j] = he.Term{W: entries[ti].w, A: it.plan.Factor(o, t, A, R, rho)}
			ti++
		}
		ct, err := h.sc.MulMaskedSum(terms, out.Layout, out.Rows, out.Width, masks[o], h.rnd)
		if err != nil {
			return nil, err
		}
		b, err := ct.AppendBinary(make([]byte, 0, it.out[o]))
		if err != nil {
			return nil, err
		}
		if int64(len(b)) != it.out[o] {
			return nil, fmt.Errorf("output %d of %d bytes, want %d", o, len(b), it.out[o])
		}
		if o == 0 {
			rho = it.plan.Rho(heRowSeed(sid, it, b))
		}
		msg = append(msg, bytesToWordsPad(b)...)
	}
	cm := heCommit(sid, it, R1)
	return append(msg, cm[:]...), nil
}
