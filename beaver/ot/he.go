package ot

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/he"
)

// The weight-mask correlations of LinearHE: package beaver/he's protocol
// (Nimbus layout, Cheetah encoding) on a stream's generator.
//
// Per session (BindSession, stream StreamBase): party 0 makes a key pair
// and sends its public key.
//
// Per item (on the item's generator stream), for a product A·B with A
// party 1's fresh mask (m×k) and B party 0's weight mask (k×n; for
// KindWeightVectorTriple B = diag(b), b the 1×n mask, so k = n), the layout
// l = ChooseLayout(m, k, n) of the public shapes:
//
//  1. Party 1 sends one word: heHave if it already holds party 0's encrypted
//     B for (kind, weight id, k, n) packed with l.NW columns per ciphertext,
//     heNeed if not.
//  2. On heNeed, party 0 sends its encrypted B (he.Sizes.Weights bytes,
//     zero-padded to words, in messages of at most heChunkWords words),
//     encrypted with l; party 1 decodes it within the request's shape and
//     loads it. Party 0 serves each (kind, id, k, n, l.NW) once per session
//     and refuses a second heNeed with ErrWeightResent; heHave for weights
//     it never sent is an error too. Items with other row counts m whose
//     layouts share NW reuse the weights with their own MW
//     (he.MulMaskedLayout), so a weight is uploaded once per NW its items'
//     layouts use (once, when all items of a weight have the same m).
//  3. Party 1 sends he.MulMasked's output (he.Sizes.Output bytes,
//     zero-padded to words) with its A and its share C1 := R, both drawn
//     from the generator's secret randomness; party 0 decrypts its share C0.
//
// Party 1 keeps the loaded weights in a cache of the provider shared by all
// streams (for the whole session: he.Sizes.P1Weights each, or half with
// ProviderOptions.HECompact); streams that need the same weights at once
// wait for the one that loads them (only it sends heNeed). That wait is the
// only one across streams: the first item of a weight on another stream
// completes once the loading stream's item has been drawn by party 0 too,
// so party 0 must not hold that stream back until the waiting one's item
// is done (selection's lanes do not: a lane without prefetched material
// draws directly).

// Header words of party 1's first message of a LinearHE item.
const (
	heHave uint64 = 0x4845_4841_5645 // "HEHAVE": party 1 holds the weights
	heNeed uint64 = 0x4845_4e45_4544 // "HENEED": party 0 must send them
)

// heChunkWords bounds each message of encrypted weights (64 MiB), below
// transport's MaxMessage whatever the weights' size.
const heChunkWords = 8 << 20

// ErrWeightResent is returned by party 0 when party 1 asks for encrypted
// weights it was already sent in this session: an honest party 1 keeps
// them, so the request is refused rather than uploading them again.
var ErrWeightResent = errors.New("ot: the peer asked again for encrypted weights it was already sent")

// heKey names one upload of encrypted weights: the weight, its shape and
// its packing NW.
type heKey struct {
	kind     beaver.Kind
	id       uint64
	k, n, nw int
}

// heEntry is party 1's cache entry: done is closed once w (or err) is set.
type heEntry struct {
	done chan struct{}
	w    *he.Weights
	err  error
}

// heState is a LinearHE provider's state.
type heState struct {
	sc *he.Scheme
	sk *he.SecretKey // party 0
	pk *he.PublicKey // party 0's key (party 1: as received)
	// rnd, when set, replaces crypto/rand for KeyGen, EncryptWeights and
	// MulMasked (tests).
	rnd io.Reader
	// compact: party 1 loads with he.LoadWeightsCompact.
	compact bool
	// draw, when set, replaces the generator's secret randomness of party
	// 1's A and R (view tests fix it).
	draw func(n int) []uint64

	mu    sync.Mutex
	sent  map[heKey]bool     // party 0: uploads made
	cache map[heKey]*heEntry // party 1: weights held or being loaded
	stats HEStats
}

// HEStats counts a LinearHE provider's weight uploads (party 0: sent;
// party 1: received and loaded) and the items it made with them.
type HEStats struct {
	Uploads     int64 // encrypted weight matrices sent or received
	UploadBytes int64 // their bytes (he.Sizes.Weights each, before padding)
	Items       int64 // weight-mask items made with HE
	Held        int64 // party 1: encrypted weight matrices held now (loaded, not released)
	Released    int64 // party 1: encrypted weight matrices dropped by ReleaseWeights
}

func newHEState(p he.Params) (*heState, error) {
	sc, err := he.NewScheme(p)
	if err != nil {
		return nil, err
	}
	return &heState{sc: sc, sent: map[heKey]bool{}, cache: map[heKey]*heEntry{}}, nil
}

// keys runs the LinearHE part of the session setup on c: party 0 makes a
// key pair and sends the public key, party 1 receives and decodes it.
func (h *heState) keys(ctx context.Context, c Conn, party int) error {
	size := h.sc.Sizes(1, 1, 1, he.Layout{}).PublicKey
	if party == 0 {
		sk, pk, err := h.sc.KeyGen(h.rnd)
		if err != nil {
			return fmt.Errorf("he key generation: %w", err)
		}
		b, err := pk.AppendBinary(nil)
		if err != nil {
			return fmt.Errorf("he public key: %w", err)
		}
		if err := c.SendWords(ctx, bytesToWordsPad(b)); err != nil {
			return fmt.Errorf("send he public key: %w", err)
		}
		h.sk, h.pk = sk, pk
		return nil
	}
	w := make([]uint64, wordsFor(size))
	if err := c.RecvWords(ctx, w); err != nil {
		return fmt.Errorf("receive he public key: %w", err)
	}
	b, err := wordsToBytesExact(w, size)
	if err != nil {
		return fmt.Errorf("he public key: %w", err)
	}
	pk, err := h.sc.DecodePublicKey(b)
	if err != nil {
		return fmt.Errorf("he public key: %w", err)
	}
	h.pk = pk
	return nil
}

// HEStats returns the LinearHE counters (zero with LinearOT).
func (p *Provider) HEStats() HEStats {
	if p.he == nil {
		return HEStats{}
	}
	p.he.mu.Lock()
	defer p.he.mu.Unlock()
	st := p.he.stats
	st.Held = int64(len(p.he.cache))
	return st
}

// ReleaseWeights implements beaver.WeightReleaser: party 1 drops the
// encrypted weights it holds for the weight ids in [lo, hi) (a selection
// phase's, once its forward is done: several GB of prepared ciphertexts a
// phase). Weights still loading are kept. Party 0 keeps its record of the
// uploads, so a later request for a released id is refused
// (ErrWeightResent) rather than uploaded again. Without LinearHE it does
// nothing.
func (p *Provider) ReleaseWeights(lo, hi uint64) {
	if p.he == nil || lo >= hi {
		return
	}
	h := p.he
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, e := range h.cache {
		if key.id < lo || key.id >= hi {
			continue
		}
		select {
		case <-e.done:
			delete(h.cache, key)
			h.stats.Released++
		default: // still loading: its owner is about to use it
		}
	}
}

// heGenerate makes this party's parts of a weight-mask item r with HE on
// generator g (see the protocol above): party 0 (nil, C0), party 1 (A, C1).
func (p *Provider) heGenerate(ctx context.Context, g *Gen, sid beaver.SessionID, r beaver.Request) ([][]uint64, error) {
	h := p.he
	m, k, n := r.M, r.K, r.N
	if r.Kind == beaver.KindWeightVectorTriple {
		k = n // A ⊙ b = A·diag(b)
	}
	what := fmt.Sprintf("he %v", r.Kind)
	if k > h.sc.Params().MaxInner {
		return nil, fmt.Errorf("%s: inner dimension %d above the HE parameters' MaxInner %d", what, k, h.sc.Params().MaxInner)
	}
	if _, err := checkSize(what, m, k); err != nil {
		return nil, err
	}
	if _, err := checkSize(what, m, n); err != nil {
		return nil, err
	}
	l, err := h.sc.ChooseLayout(m, k, n)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	key := heKey{kind: r.Kind, id: r.WeightID, k: k, n: n, nw: l.NW}
	sz := h.sc.Sizes(m, k, n, l)
	if err := g.begin(ctx, what); err != nil {
		return nil, err
	}
	var ps [][]uint64
	if p.party == 0 {
		ps, err = p.heParty0(ctx, g, sid, r, key, l, sz)
	} else {
		ps, err = p.heParty1(ctx, g, m, key, l, sz)
	}
	if err == nil {
		h.mu.Lock()
		h.stats.Items++
		h.mu.Unlock()
	}
	return ps, g.end(what, err)
}

// heParty0 is party 0's side of one item.
func (p *Provider) heParty0(ctx context.Context, g *Gen, sid beaver.SessionID, r beaver.Request, key heKey, l he.Layout, sz he.Sizes) ([][]uint64, error) {
	h := p.he
	hdr, err := g.exchange(ctx, nil, 1)
	if err != nil {
		return nil, fmt.Errorf("receive header: %w", err)
	}
	switch hdr[0] {
	case heNeed:
		h.mu.Lock()
		if h.sent[key] {
			h.mu.Unlock()
			return nil, fmt.Errorf("weight %d (%d×%d, NW %d): %w", key.id, key.k, key.n, key.nw, ErrWeightResent)
		}
		h.sent[key] = true
		h.mu.Unlock()
		var B []uint64
		if r.Kind == beaver.KindWeightVectorTriple {
			b := p.mask(sid, r.WeightID, 1, key.n)
			B = make([]uint64, key.n*key.n)
			for j, v := range b {
				B[j*key.n+j] = v
			}
		} else {
			B = p.mask(sid, r.WeightID, key.k, key.n)
		}
		ew, err := h.sc.EncryptWeights(h.sk, B, key.k, key.n, l, h.rnd)
		if err != nil {
			return nil, err
		}
		b, err := ew.AppendBinary(make([]byte, 0, sz.Weights))
		if err != nil {
			return nil, err
		}
		if int64(len(b)) != sz.Weights {
			return nil, fmt.Errorf("encrypted weights of %d bytes, want %d", len(b), sz.Weights)
		}
		if err := g.sendChunked(ctx, b); err != nil {
			return nil, fmt.Errorf("send encrypted weights %d: %w", key.id, err)
		}
		h.mu.Lock()
		h.stats.Uploads++
		h.stats.UploadBytes += sz.Weights
		h.mu.Unlock()
	case heHave:
		h.mu.Lock()
		sent := h.sent[key]
		h.mu.Unlock()
		if !sent {
			return nil, fmt.Errorf("the peer claims to hold encrypted weights %d (%d×%d, NW %d) that were never sent", key.id, key.k, key.n, key.nw)
		}
	default:
		return nil, fmt.Errorf("malformed header word %#x", hdr[0])
	}
	ow, err := g.exchange(ctx, nil, wordsFor(sz.Output))
	if err != nil {
		return nil, fmt.Errorf("receive output: %w", err)
	}
	ob, err := wordsToBytesExact(ow, sz.Output)
	if err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	out, err := h.sc.DecodeOutput(ob, r.M, key.n)
	if err != nil {
		return nil, err
	}
	c0, err := h.sc.DecryptShares(h.sk, out, r.M, key.n, l)
	if err != nil {
		return nil, err
	}
	return parts(nil, c0), nil
}

// heParty1 is party 1's side of one item.
func (p *Provider) heParty1(ctx context.Context, g *Gen, m int, key heKey, l he.Layout, sz he.Sizes) ([][]uint64, error) {
	h := p.he
	draw := g.draw
	if h.draw != nil {
		draw = h.draw
	}
	A := draw(m * key.k)
	R := draw(m * key.n)
	h.mu.Lock()
	e := h.cache[key]
	owner := e == nil
	if owner {
		e = &heEntry{done: make(chan struct{})}
		h.cache[key] = e
	}
	h.mu.Unlock()
	if owner {
		e.w, e.err = p.heLoad(ctx, g, key, l, sz)
		close(e.done)
		if e.err != nil {
			return nil, e.err
		}
	} else {
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for encrypted weights %d: %w", key.id, ctx.Err())
		}
		if e.err != nil {
			return nil, fmt.Errorf("encrypted weights %d: loading them on another stream failed: %w", key.id, e.err)
		}
		if _, err := g.exchange(ctx, []uint64{heHave}, 0); err != nil {
			return nil, fmt.Errorf("send header: %w", err)
		}
	}
	out, err := h.sc.MulMaskedLayout(e.w, l, A, m, R, h.rnd)
	if err != nil {
		return nil, err
	}
	b, err := out.AppendBinary(make([]byte, 0, sz.Output))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != sz.Output {
		return nil, fmt.Errorf("output of %d bytes, want %d", len(b), sz.Output)
	}
	if _, err := g.exchange(ctx, bytesToWordsPad(b), 0); err != nil {
		return nil, fmt.Errorf("send output: %w", err)
	}
	// For KindWeightVectorTriple A is m×n and A·diag(b) = A ⊙ b.
	return parts(A, R), nil
}

// heLoad asks party 0 for the encrypted weights of key and loads them.
func (p *Provider) heLoad(ctx context.Context, g *Gen, key heKey, l he.Layout, sz he.Sizes) (*he.Weights, error) {
	h := p.he
	if _, err := g.exchange(ctx, []uint64{heNeed}, 0); err != nil {
		return nil, fmt.Errorf("send header: %w", err)
	}
	b, err := g.recvChunked(ctx, sz.Weights)
	if err != nil {
		return nil, fmt.Errorf("receive encrypted weights %d: %w", key.id, err)
	}
	ew, err := h.sc.DecodeEncryptedWeights(b, key.k, key.n)
	if err != nil {
		return nil, fmt.Errorf("encrypted weights %d: %w", key.id, err)
	}
	if ew.K != key.k || ew.N != key.n || ew.Layout != l {
		return nil, fmt.Errorf("encrypted weights %d: %d×%d layout %v, want %d×%d layout %v", key.id, ew.K, ew.N, ew.Layout, key.k, key.n, l)
	}
	load := h.sc.LoadWeights
	if h.compact {
		load = h.sc.LoadWeightsCompact
	}
	w, err := load(h.pk, ew)
	if err != nil {
		return nil, fmt.Errorf("encrypted weights %d: %w", key.id, err)
	}
	h.mu.Lock()
	h.stats.Uploads++
	h.stats.UploadBytes += sz.Weights
	h.mu.Unlock()
	return w, nil
}

// sendChunked sends b zero-padded to words, in messages of at most
// heChunkWords words.
func (g *Gen) sendChunked(ctx context.Context, b []byte) error {
	for off := 0; off < len(b); off += 8 * heChunkWords {
		end := min(len(b), off+8*heChunkWords)
		if _, err := g.exchange(ctx, bytesToWordsPad(b[off:end]), 0); err != nil {
			return err
		}
	}
	return nil
}

// recvChunked receives the size bytes sendChunked sent (size > 0, known to
// both parties), checking the padding.
func (g *Gen) recvChunked(ctx context.Context, size int64) ([]byte, error) {
	b := make([]byte, 0, size)
	for off := int64(0); off < size; off += 8 * heChunkWords {
		n := min(size-off, 8*heChunkWords)
		w, err := g.exchange(ctx, nil, wordsFor(n))
		if err != nil {
			return nil, err
		}
		c, err := wordsToBytesExact(w, n)
		if err != nil {
			return nil, err
		}
		b = append(b, c...)
	}
	return b, nil
}

// wordsFor is the number of words that hold size bytes.
func wordsFor(size int64) int { return int((size + 7) / 8) }

// bytesToWordsPad packs b little-endian into words, the last one
// zero-padded.
func bytesToWordsPad(b []byte) []uint64 {
	w := make([]uint64, (len(b)+7)/8)
	full := len(b) / 8
	for i := range full {
		w[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	if full < len(w) {
		var last [8]byte
		copy(last[:], b[8*full:])
		w[full] = binary.LittleEndian.Uint64(last[:])
	}
	return w
}

// wordsToBytesExact unpacks the first size bytes of w (wordsFor(size)
// words), refusing non-zero padding.
func wordsToBytesExact(w []uint64, size int64) ([]byte, error) {
	if int64(len(w)) != int64(wordsFor(size)) {
		return nil, fmt.Errorf("%d words for %d bytes: %w", len(w), size, he.ErrMalformed)
	}
	b := make([]byte, 0, 8*len(w))
	for _, x := range w {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	for _, x := range b[size:] {
		if x != 0 {
			return nil, fmt.Errorf("non-zero padding: %w", he.ErrMalformed)
		}
	}
	return b[:size], nil
}
