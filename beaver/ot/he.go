package ot

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/he"
	"github.com/selectformer/selectformer/share"
)

// The weight-mask correlations of LinearHE: package beaver/he's protocol
// (Nimbus layout, Cheetah encoding) on a stream's generator, with every
// output checked by party 0 before it is used (he.CheckedPlan).
//
// Cost, per item of an m×k·k×n product (he.PlanChecked's plan, public):
// party 1 sends one header word per encrypted matrix of the plan (two or
// three) and one message of the plan's outputs, each he.OutputSizes bytes
// rounded up to words, plus a 32-byte commitment; the check adds 104,722
// bytes to a product of more than 64 rows (2.9% of the 3,661,842 of
// 128×768·768×1536), one check output to a short one (83,302 bytes for
// 1×768·768×768) or 40·68 bits a row beside a short, narrow one's (340
// bytes for 1×128·128×2; he.CheckedPlan; bench/TWOHOSTS.md step 5 has an
// sst2 candidate's). Once per session party 0 sends its public key and
// each encrypted matrix of the plans
// (he.WeightSizes bytes, rounded up to words): a weight's B and B·V (or
// [B | B·V]), and V's rows for each n, shared by the weights with n columns.
//
// Per session (BindSession, stream StreamBase): party 0 makes a key pair
// whose public seed is derived from the session id, sends the public key,
// and draws the secret seed of its projections V (n×he.CheckColumns, one
// per n, uniform words).
//
// Per item (on the item's generator stream), for a product A·B with A
// party 1's fresh mask (m×k) and B party 0's weight mask (k×n; for
// KindWeightVectorTriple B = diag(b), b the 1×n mask, so k = n), the plan
// p = he.PlanChecked(m, k, n) of the public shapes:
//
//  1. Party 1 sends one word per term of p (he.PlanTerm, in order): heHave
//     if it already holds party 0's encryption of the term's matrix (B, B·V,
//     [B | B·V] for (kind, weight id, k, n), or V's rows for n) packed with
//     the term's output's NW and KW at the term's offset, heNeed if not.
//  2. For each heNeed, in order, party 0 sends that encryption
//     (he.EncryptWeightsAt, its public seed derived from the session id and
//     the term's key: party 1 refuses another), in messages of at most
//     heChunkWords words; party 1 decodes it within the term's shape and
//     loads it. Party 0 serves each key once per session and refuses a
//     second heNeed with ErrWeightResent; heHave for a key it never sent is
//     an error too. Items with other row counts m whose plans share a key
//     reuse its encryption with their own MW (he.MulMaskedSum).
//  3. Party 1 sends the plan's outputs (he.MulMaskedSum of each output's
//     terms, the mask of output 0's first n columns being its share
//     C1 := R, the check columns' fresh; in a compressed plan the check
//     outputs' factors are ρ·A and −ρ·R, ρ expanded from SHA-256(domain ‖
//     session id ‖ item ‖ output 0), heRowSeed) and h = SHA-256(domain ‖
//     session id ‖ item ‖ R1), R1 the sum of the check columns' masks;
//     A, R and the masks are drawn from the generator's secret randomness.
//  4. Party 0 decrypts the outputs, computes its share C0 and the residual
//     C0·V − D or ρ·C0·V − D (he.CheckedPlan.Residual, ρ from the output 0
//     it received), and accepts iff its hash is h.
//     Otherwise it fails with an error wrapping beaver.ErrCorrelationCheck,
//     discards its secret key (every later item and bind of the provider
//     fails the same way), and returns nothing: no value derived from the
//     item's outputs leaves the provider, so none can be opened, compared
//     or revealed. Honest outputs pass, and the check reveals nothing to
//     party 0 (it computes R1 itself; D is uniform).
//
// Why it suffices against a data owner that alters what it sends (its
// outputs, its header, or the encryptions it holds): see package beaver/he,
// "Active security". Briefly: any change moves C0 by E0 and D by E_D with
// E0, E_D functions of party 0's key and noise and of party 1's choices but
// not of V (party 1 holds V only encrypted, and party 0's decryption is
// linear in the ciphertext, so party 1 cannot make an error that depends on
// V through the key); passing needs E0·V = E_D + (a value party 1 fixes),
// which for E0 ≠ 0 holds with probability at most 2^−40 over V (in a
// compressed plan ρ·E0·V, and ρ·E0 = 0 has probability 2^−64 over ρ, which
// party 1 learns only once its output fixed E0). A C0 that
// passes is the product for the factor and mask party 1 encrypted, as from
// an honest party 1; an altered C0 passes with probability at most 2^−40,
// and the first failure ends the session and its key, so everything party 1
// learns from outcomes about party 0's key is the index of the first
// failure: at most log2(items + 1) bits.
//
// Party 1 keeps the loaded encryptions in a cache of the provider shared
// by all streams (for the whole session: he.WeightSizes.P1 each, or
// P1Compact with ProviderOptions.HECompact); streams that need the same
// encryption at once wait for the one that loads it (only it sends
// heNeed): an item claims the keys nobody claimed yet, waits for those
// claimed before (always by an earlier item, so waits never form a cycle),
// then sends its header and loads its own. That wait is the only one across
// streams: the first item of a weight on another stream completes once the
// loading stream's item has been drawn by party 0 too, so party 0 must not
// hold that stream back until the waiting one's item is done (selection's
// lanes do not: a lane without prefetched material draws directly).

// Header words of party 1's first message of a LinearHE item, one per term.
const (
	heHave uint64 = 0x4845_4841_5645 // "HEHAVE": party 1 holds the encryption
	heNeed uint64 = 0x4845_4e45_4544 // "HENEED": party 0 must send it
)

// heChunkWords bounds each message of encrypted weights (64 MiB), below
// transport's MaxMessage whatever the weights' size.
const heChunkWords = 8 << 20

// heCommitWords is the size of party 1's commitment to its check masks
// (SHA-256).
const heCommitWords = sha256.Size / 8

// heProtocol is mixed into the HE parameters' fingerprint of the setup
// message: peers running another version of this protocol fail the setup
// with ErrModeMismatch.
const heProtocol = "selectformer/beaver/ot/he protocol v2 (checked outputs)"

// ErrWeightResent is returned by party 0 when party 1 asks for encrypted
// weights it was already sent in this session: an honest party 1 keeps
// them, so the request is refused rather than uploading them again.
var ErrWeightResent = errors.New("ot: the peer asked again for encrypted weights it was already sent")

// heKey names one upload: the encryption of a plan term's matrix packed
// with nw at its offset. The matrices derived from a weight's mask name it
// (kind, id, k, n); V's rows name only n and the rows (V is shared by every
// weight with n columns).
type heKey struct {
	matrix     he.Matrix
	kind       beaver.Kind
	id         uint64
	k, n       int
	row0, row1 int
	off, nw    int
	kw         int // the packing's KW (he.Layout)
}

// heTerm is one term of an item's plan: its key, its output's layout and
// its matrix's shape.
type heTerm struct {
	key        heKey
	t          he.PlanTerm
	l          he.Layout
	rows, cols int
}

// heItem is an item's public plan: its terms, in order, and the sizes of
// its output messages.
type heItem struct {
	r       beaver.Request
	m, k, n int
	plan    he.CheckedPlan
	terms   []heTerm
	out     []int64 // bytes of each output message
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
	pk *he.PublicKey // party 0's key (party 1: as received)
	// rnd, when set, replaces crypto/rand for KeyGen, EncryptWeightsAt,
	// MulMaskedSum and the projections' seed (tests).
	rnd io.Reader
	// compact: party 1 loads with he.LoadWeightsCompact.
	compact bool
	// draw, when set, replaces the generator's secret randomness of party
	// 1's A, R and check masks (view tests fix it).
	draw func(n int) []uint64

	mu     sync.Mutex
	sk     *he.SecretKey      // party 0; nil once a check failed
	vseed  share.Seed         // party 0: secret seed of the projections V
	failed error              // party 0: the failed check that ended the key
	sent   map[heKey]bool     // party 0: uploads made
	cache  map[heKey]*heEntry // party 1: encryptions held or being loaded
	stats  HEStats
}

// HEStats counts a LinearHE provider's uploads (party 0: sent; party 1:
// received and loaded) and the items it made with them.
type HEStats struct {
	Uploads     int64 // encrypted weight matrices (B, B·V or [B | B·V]) sent or received
	Projections int64 // encrypted row blocks of projections V sent or received (party 1 keeps them for the session)
	UploadBytes int64 // the bytes of both (he.WeightSizes.Bytes each, before padding)
	Items       int64 // weight-mask items made with HE (party 0: whose outputs passed the check)
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

// fingerprint is what the setup message carries for LinearHE: the HE
// parameters' fingerprint bound to this protocol's version.
func (h *heState) fingerprint() [32]byte {
	fp := h.sc.Params().Fingerprint()
	return sha256.Sum256(append([]byte(heProtocol), fp[:]...))
}

// seedFor derives the public seed of what (the public key, or the
// encryption of key) from the session id: a function of the joint coin, so
// that party 0 does not choose the c1 halves party 1 multiplies.
func seedFor(sid beaver.SessionID, key *heKey) [he.SeedSize]byte {
	b := append([]byte("selectformer/beaver/ot/he/seed/v1/"), sid[:]...)
	if key == nil {
		return sha256.Sum256(append(b, "public key"...))
	}
	b = append(b, "weights"...)
	for _, v := range []uint64{uint64(key.matrix), uint64(key.kind), key.id, uint64(key.k), uint64(key.n),
		uint64(key.row0), uint64(key.row1), uint64(key.off), uint64(key.nw), uint64(key.kw)} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return sha256.Sum256(b)
}

// keys runs the LinearHE part of the session setup on c: party 0 makes a
// key pair with the seed derived from sid and sends the public key; party
// 1 receives and decodes it, refusing another seed.
func (h *heState) keys(ctx context.Context, c Conn, party int, sid beaver.SessionID) error {
	size := h.sc.Sizes(1, 1, 1, he.Layout{}).PublicKey
	seed := seedFor(sid, nil)
	if party == 0 {
		rnd := h.rnd
		if rnd == nil {
			rnd = rand.Reader
		}
		var vseed share.Seed
		if _, err := io.ReadFull(rnd, vseed[:]); err != nil {
			return fmt.Errorf("he projection seed: %w", err)
		}
		sk, pk, err := h.sc.KeyGenWithSeed(seed, h.rnd)
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
		h.mu.Lock()
		h.sk, h.pk, h.vseed = sk, pk, vseed
		h.mu.Unlock()
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
	if pk.Seed != seed {
		return fmt.Errorf("he public key: its seed is not the one derived from the session id: %w", he.ErrMalformed)
	}
	h.pk = pk
	return nil
}

// err returns the failed check that ended party 0's key, if any.
func (h *heState) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed
}

// fail ends party 0's key after a failed check: the secret key is dropped,
// and every later item and bind fails with err.
func (h *heState) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failed == nil {
		h.failed = err
	}
	h.sk = nil
}

// projection returns party 0's projection V for n columns (n×c).
func (h *heState) projection(n int) []uint64 {
	dom := binary.LittleEndian.AppendUint64([]byte("selectformer/beaver/ot/he/projection/v1/"), uint64(n))
	return share.NewPRG(h.vseed, string(dom)).Words(n * he.CheckColumns)
}

// HEStats returns the LinearHE counters (zero with LinearOT).
func (p *Provider) HEStats() HEStats {
	if p.he == nil {
		return HEStats{}
	}
	p.he.mu.Lock()
	defer p.he.mu.Unlock()
	st := p.he.stats
	for key := range p.he.cache {
		if key.matrix != he.MatrixProj {
			st.Held++
		}
	}
	return st
}

// ReleaseWeights implements beaver.WeightReleaser: party 1 drops the
// encrypted weights it holds for the weight ids in [lo, hi) (a selection
// phase's, once its forward is done: several GB of prepared ciphertexts a
// phase). Weights still loading are kept, and so are the projections V,
// which weights of later phases with the same n share. Party 0 keeps its
// record of the uploads, so a later request for a released id is refused
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
		if key.matrix == he.MatrixProj || key.id < lo || key.id >= hi {
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
	what := fmt.Sprintf("he %v", r.Kind)
	it, err := h.item(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := g.begin(ctx, what); err != nil {
		return nil, err
	}
	var ps [][]uint64
	if p.party == 0 {
		ps, err = p.heParty0(ctx, g, sid, it)
	} else {
		ps, err = p.heParty1(ctx, g, sid, it)
	}
	if err == nil {
		h.mu.Lock()
		h.stats.Items++
		h.mu.Unlock()
	}
	return ps, g.end(what, err)
}

// item returns the public plan of the weight-mask item r.
func (h *heState) item(r beaver.Request) (*heItem, error) {
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

// heMask returns party 0's mask B of the item (k×n; diag(b) for
// KindWeightVectorTriple).
func (p *Provider) heMask(sid beaver.SessionID, it *heItem) []uint64 {
	if it.r.Kind != beaver.KindWeightVectorTriple {
		return p.mask(sid, it.r.WeightID, it.k, it.n)
	}
	b := p.mask(sid, it.r.WeightID, 1, it.n)
	B := make([]uint64, it.n*it.n)
	for j, v := range b {
		B[j*it.n+j] = v
	}
	return B
}

// heParty0 is party 0's side of one item.
func (p *Provider) heParty0(ctx context.Context, g *Gen, sid beaver.SessionID, it *heItem) ([][]uint64, error) {
	h := p.he
	if err := h.err(); err != nil {
		return nil, fmt.Errorf("the HE key was discarded after a failed check: %w", err)
	}
	hdr, err := g.exchange(ctx, nil, len(it.terms))
	if err != nil {
		return nil, fmt.Errorf("receive header: %w", err)
	}
	V := h.projection(it.n)
	var B []uint64
	for i, t := range it.terms {
		switch hdr[i] {
		case heNeed:
			h.mu.Lock()
			sent, sk := h.sent[t.key], h.sk
			h.sent[t.key] = true
			h.mu.Unlock()
			if sent {
				return nil, fmt.Errorf("%v: %w", t.key, ErrWeightResent)
			}
			if sk == nil {
				return nil, fmt.Errorf("the HE key was discarded after a failed check: %w", h.err())
			}
			if B == nil {
				B = p.heMask(sid, it)
			}
			if err := p.heUpload(ctx, g, sk, sid, it, t, B, V); err != nil {
				return nil, err
			}
		case heHave:
			h.mu.Lock()
			sent := h.sent[t.key]
			h.mu.Unlock()
			if !sent {
				return nil, fmt.Errorf("the peer claims to hold %v, which was never sent", t.key)
			}
		default:
			return nil, fmt.Errorf("malformed header word %d: %#x", i, hdr[i])
		}
	}
	total := heCommitWords
	for _, b := range it.out {
		total += wordsFor(b)
	}
	msg, err := g.exchange(ctx, nil, total)
	if err != nil {
		return nil, fmt.Errorf("receive outputs: %w", err)
	}
	h.mu.Lock()
	sk := h.sk
	h.mu.Unlock()
	if sk == nil {
		return nil, fmt.Errorf("the HE key was discarded after a failed check: %w", h.err())
	}
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
	return parts(nil, C0), nil
}

// heUpload encrypts term t's matrix of the item (from B and V) and sends
// it.
func (p *Provider) heUpload(ctx context.Context, g *Gen, sk *he.SecretKey, sid beaver.SessionID, it *heItem, t heTerm, B, V []uint64) error {
	h := p.he
	W, err := it.plan.Matrix(t.t, B, V)
	if err != nil {
		return err
	}
	ew, err := h.sc.EncryptWeightsAt(sk, W, t.rows, t.cols, t.t.Off, t.l, seedFor(sid, &t.key), h.rnd)
	if err != nil {
		return err
	}
	size := h.sc.WeightSizes(t.rows, t.cols, t.t.Off, t.l).Bytes
	b, err := ew.AppendBinary(make([]byte, 0, size))
	if err != nil {
		return err
	}
	if int64(len(b)) != size {
		return fmt.Errorf("%v: %d bytes, want %d", t.key, len(b), size)
	}
	if err := g.sendChunked(ctx, b); err != nil {
		return fmt.Errorf("send %v: %w", t.key, err)
	}
	h.count(t.key, size)
	return nil
}

// count records an upload of size bytes.
func (h *heState) count(key heKey, size int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
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

// heParty1 is party 1's side of one item.
func (p *Provider) heParty1(ctx context.Context, g *Gen, sid beaver.SessionID, it *heItem) ([][]uint64, error) {
	h := p.he
	draw := g.draw
	if h.draw != nil {
		draw = h.draw
	}
	A := draw(it.m * it.k)
	R := draw(it.m * it.n)
	entries := make([]*heEntry, len(it.terms))
	owned := make([]bool, len(it.terms))
	hdr := make([]uint64, len(it.terms))
	h.mu.Lock()
	for i, t := range it.terms {
		e := h.cache[t.key]
		if e == nil {
			e = &heEntry{done: make(chan struct{})}
			h.cache[t.key] = e
			owned[i] = true
		}
		entries[i] = e
	}
	h.mu.Unlock()
	// An entry this item owns is always closed, with an error if it was not
	// loaded, so that no other stream waits on it forever.
	defer func() {
		for i, e := range entries {
			if owned[i] && e.w == nil && e.err == nil {
				e.err = fmt.Errorf("%v: the loading stream failed first", it.terms[i].key)
				close(e.done)
			}
		}
	}()
	for i, e := range entries {
		hdr[i] = heNeed
		if owned[i] {
			continue
		}
		hdr[i] = heHave
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for %v: %w", it.terms[i].key, ctx.Err())
		}
		if e.err != nil {
			return nil, fmt.Errorf("%v: loading it on another stream failed: %w", it.terms[i].key, e.err)
		}
	}
	if _, err := g.exchange(ctx, hdr, 0); err != nil {
		return nil, fmt.Errorf("send header: %w", err)
	}
	for i, e := range entries {
		if owned[i] {
			w, err := p.heLoad(ctx, g, sid, it.terms[i])
			e.w, e.err = w, err
			close(e.done)
			if err != nil {
				return nil, err
			}
		}
	}
	masks, R1 := it.plan.Masks(R, draw)
	var msg, rho []uint64
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
	msg = append(msg, cm[:]...)
	if _, err := g.exchange(ctx, msg, 0); err != nil {
		return nil, fmt.Errorf("send outputs: %w", err)
	}
	// For KindWeightVectorTriple A is m×n and A·diag(b) = A ⊙ b.
	return parts(A, R), nil
}

// heLoad receives party 0's encryption of term t and loads it.
func (p *Provider) heLoad(ctx context.Context, g *Gen, sid beaver.SessionID, t heTerm) (*he.Weights, error) {
	h := p.he
	size := h.sc.WeightSizes(t.rows, t.cols, t.t.Off, t.l).Bytes
	b, err := g.recvChunked(ctx, size)
	if err != nil {
		return nil, fmt.Errorf("receive %v: %w", t.key, err)
	}
	ew, err := h.sc.DecodeEncryptedWeights(b, t.rows, t.cols)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", t.key, err)
	}
	if ew.K != t.rows || ew.N != t.cols || ew.Off != t.t.Off || ew.Layout != t.l {
		return nil, fmt.Errorf("%v: %d×%d at column %d, layout %v; want %d×%d at %d, layout %v", t.key, ew.K, ew.N, ew.Off, ew.Layout, t.rows, t.cols, t.t.Off, t.l)
	}
	if ew.Seed != seedFor(sid, &t.key) {
		return nil, fmt.Errorf("%v: its seed is not the one derived from the session id: %w", t.key, he.ErrMalformed)
	}
	load := h.sc.LoadWeights
	if h.compact {
		load = h.sc.LoadWeightsCompact
	}
	w, err := load(h.pk, ew)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", t.key, err)
	}
	h.count(t.key, size)
	return w, nil
}

// String names the encryption key stands for (in errors).
func (key heKey) String() string {
	if key.matrix == he.MatrixProj {
		return fmt.Sprintf("encrypted projection rows [%d, %d) for %d columns (offset %d, NW %d, KW %d)", key.row0, key.row1, key.n, key.off, key.nw, key.kw)
	}
	return fmt.Sprintf("encrypted weight %d (%v %d×%d: %v, offset %d, NW %d, KW %d)", key.id, key.kind, key.k, key.n, key.matrix, key.off, key.nw, key.kw)
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
