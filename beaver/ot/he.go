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

// The weight-mask correlations of a Lattice (the WeightMaskGenerator of
// -provider he): package beaver/he's protocol
// (Nimbus layout, Cheetah encoding) on a stream's generator, with every
// output checked by party 0 before it is used (he.CheckedPlan).
//
// Cost, per item of an m×k·k×n product (he.PlanChecked's plan, public):
// party 1 sends one message: a tag word (heOutputs), the plan's outputs,
// each he.OutputSizes bytes rounded up to words, and a 32-byte commitment;
// the check adds 104,722 bytes to a product of more than 64 rows (2.9% of
// the 3,661,842 of 128×768·768×1536), one check output to a short one
// (83,302 bytes for 1×768·768×768) or 40·68 bits a row beside a short,
// narrow one's (340 bytes for 1×128·128×2; he.CheckedPlan;
// bench/TWOHOSTS.md step 5 has an sst2 candidate's). Once per session
// party 0 sends its public key and each encrypted matrix of the plans
// (he.WeightSizes bytes, rounded up to words, after a reply header of 96
// bytes), each asked for by party 1 in a request of 88 bytes: a weight's B
// and B·V (or [B | B·V]), and V's rows for each n, shared by the weights
// with n columns.
//
// Per session (BindSession, stream StreamBase): party 0 makes a key pair
// whose public seed is derived from the session id, sends the public key,
// and draws the secret seed of its projections V (n×he.CheckColumns, one
// per n, uniform words). The same stream then carries the uploads
// (he_upload.go): party 1 asks for each encryption its items need, the
// first time one needs it, and party 0 sends it once one of its own items
// needs it too; two goroutines per party serve that stream.
//
// Per item (on the item's generator stream, or, for a weight triple made
// inside the computation, in the computation's own message: he_online.go,
// where A is party 1's share of the product's operand), for a product A·B
// with A party 1's fresh mask (m×k) and B party 0's weight mask (k×n; for
// KindWeightVectorTriple B = diag(b), b the 1×n mask, so k = n), the plan
// p = he.PlanChecked(m, k, n) of the public shapes:
//
//  1. Party 0 registers the keys of the terms of p (he.PlanTerm: the
//     encryption of the term's matrix, B, B·V, [B | B·V] for (kind,
//     weight id, k, n), or V's rows for n, packed with the term's output's
//     NW and KW at the term's offset) for upload, with what makes them.
//     Party 1 asks for those it neither holds nor asked for, and waits
//     until it holds all of them.
//  2. On the session stream, party 0 sends each key asked for and
//     registered (he.EncryptWeightsAt, its public seed derived from the
//     session id and the key: party 1 refuses another), in messages of at
//     most heChunkWords words; party 1 decodes it within the term's shape
//     and loads it. Party 0 serves each key once per session and refuses
//     a second request for it (ErrWeightResent: an honest party 1 keeps
//     what it was sent). Items with other row counts m whose plans share a
//     key reuse its encryption with their own MW (he.MulMaskedSum).
//  3. Party 1 sends heOutputs and the plan's outputs (he.MulMaskedSum of
//     each output's terms, the mask of output 0's first n columns being
//     its share C1 := R, the check columns' fresh; in a compressed plan the
//     check outputs' factors are ρ·A and −ρ·R, ρ expanded from
//     SHA-256(domain ‖ session id ‖ item ‖ output 0), heRowSeed) and
//     h = SHA-256(domain ‖ session id ‖ item ‖ R1), R1 the sum of the check
//     columns' masks; A, R and the masks are drawn from the generator's
//     secret randomness.
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
// outputs, its requests, or the encryptions it holds): see package beaver/he,
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
// P1Compact with LatticeOptions.Compact); items that need an encryption
// asked for but not yet loaded wait for it.
//
// The invariant that keeps the two parties' streams from waiting on each
// other (issue 38): an item waits on nothing but its own stream's earlier
// items, its peer's half of itself, and the upload service, whose
// goroutines wait on nothing but each other; never on another item's
// stream. An encryption party 1's item waits for is sent at the latest
// once party 0's half of the same item has started (it registers the key
// before it waits for anything). On d5bf317 party 1's items waited instead
// for the stream that loaded the encryption, which party 0 reached only as
// its lanes went on; the lanes of the two parties then waited on each
// other's compute slots and prefetch windows
// (TestHEProviderNoCrossStreamWait; bench's TestSelectDealerFreeNoHang).

// heOutputs is the first word of party 1's message of an item: a tag that
// makes a stream out of step fail at once.
const heOutputs uint64 = 0x4845_4f55_5450 // "HEOUTP"

// heChunkWords bounds each message of encrypted weights (64 MiB), below
// transport's MaxMessage whatever the weights' size.
const heChunkWords = 8 << 20

// heCommitWords is the size of party 1's commitment to its check masks
// (SHA-256).
const heCommitWords = sha256.Size / 8

// heProtocol is mixed into the HE parameters' fingerprint of the setup
// message: peers running another version of this protocol fail the setup
// with ErrModeMismatch.
const heProtocol = "selectformer/beaver/ot/he protocol v3 (checked outputs, uploads on the session stream)"

// ErrWeightResent is returned by party 0 when party 1 asks for encrypted
// weights it asked for before in this session: an honest party 1 keeps
// them, so the request is refused rather than uploading them again (and the
// upload service ends: every item waiting on it fails).
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

// heEntry is party 1's cache entry of a key: asked for (pending) until
// done is closed, once w (or err) is set. sid and term say how to receive
// and check the encryption.
type heEntry struct {
	done    chan struct{}
	w       *he.Weights
	err     error
	pending bool // asked for, not yet loaded (under Lattice.mu)
	arrived bool // its encryption is being received (under Lattice.mu)
	sid     beaver.SessionID
	term    heTerm
}

// Lattice is the WeightMaskGenerator that makes the weight-mask
// correlations with package beaver/he (Nimbus layout, Cheetah encoding),
// every output checked by party 0 before it is used: the protocol above.
// The model owner uploads each encrypted mask (and its projections) once
// per session, and per item the data owner sends its outputs, about 68
// bits per output word plus its ciphertexts' second halves, with check
// columns the model owner verifies. It holds one provider's session state
// (party 0's key, the uploads; party 1's cache of encryptions): make one
// per Provider (NewLattice).
type Lattice struct {
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
	setUp  bool               // Setup ran: the generator serves one provider
	sk     *he.SecretKey      // party 0; nil once a check failed
	vseed  share.Seed         // party 0: secret seed of the projections V
	failed error              // party 0: the failed check that ended the key
	sent   map[heKey]bool     // party 0: uploads made
	cache  map[heKey]*heEntry // party 1: encryptions held or asked for
	stats  HEStats

	// The upload service on the session stream (he_upload.go), under mu.
	up     Conn               // the session stream (nil before Setup)
	upStop context.CancelFunc // ends the service's goroutines
	upErr  error              // the service's failure: it serves no more
	// upFailed ends, with upErr as its cause, when the service fails
	// (failUploads calls fail).
	upFailed context.Context
	failUp   context.CancelCauseFunc
	wake     chan struct{}     // wakes the sender (one token)
	queue    []heKey           // the sender's keys: party 0 to upload, party 1 to ask for
	made     map[heKey]heMaker // party 0: keys its items need, with what makes them
	asked    map[heKey]bool    // party 0: keys party 1 asked for
	pending  int               // party 0: keys asked for that no item needed yet
	refusal  uint64            // party 0: the refusal to send (heRefuse*), 0 if none
	refused  heKey             // party 0: the key refused
}

// HEStats counts a Lattice's uploads (party 0: sent; party 1:
// received and loaded) and the items it made with them.
type HEStats struct {
	Uploads     int64 // encrypted weight matrices (B, B·V or [B | B·V]) sent or received
	Projections int64 // encrypted row blocks of projections V sent or received (party 1 keeps them for the session)
	UploadBytes int64 // the bytes of both (he.WeightSizes.Bytes each, before padding)
	Items       int64 // weight-mask items made with HE (party 0: whose outputs passed the check)
	Held        int64 // party 1: encrypted weight matrices held now (loaded, not released)
	Released    int64 // party 1: encrypted weight matrices dropped by ReleaseWeights
	// HeldBytes and PeakHeldBytes are party 1's memory of the prepared
	// encryptions it holds now and held at most at once (he.Weights.Bytes:
	// the weight matrices and the projections' rows).
	HeldBytes, PeakHeldBytes int64
	// Products and Passes are party 1's HE products so far and the passes
	// over encrypted weights they took (he.Scheme.MergeStats: products
	// that waited for the admission on the same weights share a pass).
	Products, Passes int64
}

// LatticeOptions configure NewLattice; the zero value is usable.
type LatticeOptions struct {
	// Params are the HE parameters; nil means he.DefaultParams(). Both
	// parties must use the same (BindSession compares their
	// fingerprints).
	Params *he.Params
	// Compact makes party 1 keep the encrypted weights with
	// he.LoadWeightsCompact: half the memory (he.Sizes.P1WeightsCompact),
	// their seeded halves regenerated for every item (about a fifth more
	// work). Only party 1's memory and time depend on it; the messages are
	// the same. The -provider he source sets it (issue 38: expanded, an
	// sst2-distilbert phase's weights alone took 5–6 GB).
	Compact bool
}

// NewLattice returns a lattice WeightMaskGenerator for one Provider
// (ProviderOptions.WeightMasks).
func NewLattice(opts LatticeOptions) (*Lattice, error) {
	params := he.DefaultParams()
	if opts.Params != nil {
		params = *opts.Params
	}
	sc, err := he.NewScheme(params)
	if err != nil {
		return nil, fmt.Errorf("ot: lattice weight masks: %w", err)
	}
	h := &Lattice{sc: sc, compact: opts.Compact, sent: map[heKey]bool{}, cache: map[heKey]*heEntry{},
		wake: make(chan struct{}, 1), made: map[heKey]heMaker{}, asked: map[heKey]bool{}}
	h.upFailed, h.failUp = context.WithCancelCause(context.Background())
	return h, nil
}

var _ WeightMaskGenerator = (*Lattice)(nil)

// Fingerprint implements WeightMaskGenerator: the lattice way, and the HE
// parameters' fingerprint bound to this protocol's version.
func (h *Lattice) Fingerprint() [32]byte {
	fp := h.sc.Params().Fingerprint()
	d := sha256.Sum256(append([]byte(heProtocol), fp[:]...))
	c := [32]byte{wayLattice}
	copy(c[1:], d[:])
	return c
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

// Setup implements WeightMaskGenerator, in one round: party 0 makes a key
// pair with the seed derived from sid and sends the public key; party 1
// receives and decodes it, refusing another seed. Then both start the
// upload service on c (he_upload.go): its goroutines serve the session
// stream until the connection closes. A Lattice serves one provider and
// session: a second Setup is an error.
func (h *Lattice) Setup(ctx context.Context, c Conn, party int, sid beaver.SessionID) (int64, error) {
	h.mu.Lock()
	again := h.setUp
	h.setUp = true
	h.mu.Unlock()
	if again {
		return 0, errors.New("he: this lattice weight-mask generator already serves a session (make one per provider)")
	}
	if err := h.keys(ctx, c, party, sid); err != nil {
		return 1, err
	}
	h.startUploads(ctx, c, party)
	return 1, nil
}

// keys runs the key exchange of Setup.
func (h *Lattice) keys(ctx context.Context, c Conn, party int, sid beaver.SessionID) error {
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
func (h *Lattice) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed
}

// fail ends party 0's key after a failed check: the secret key is dropped,
// and every later item and bind fails with err.
func (h *Lattice) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failed == nil {
		h.failed = err
	}
	h.sk = nil
}

// projection returns party 0's projection V for n columns (n×c).
func (h *Lattice) projection(n int) []uint64 {
	dom := binary.LittleEndian.AppendUint64([]byte("selectformer/beaver/ot/he/projection/v1/"), uint64(n))
	return share.NewPRG(h.vseed, string(dom)).Words(n * he.CheckColumns)
}

// Compact reports whether party 1 keeps the encrypted weights compact
// (LatticeOptions.Compact).
func (h *Lattice) Compact() bool { return h.compact }

// Stats returns the counters of the uploads and items so far.
func (h *Lattice) Stats() HEStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.stats
	ms := h.sc.MergeStats()
	st.Products, st.Passes = ms.Products, ms.Passes
	for key, e := range h.cache {
		if key.matrix != he.MatrixProj && e.w != nil {
			st.Held++
		}
	}
	return st
}

// Release implements WeightMaskGenerator: party 1 drops the
// encrypted weights it holds for the weight ids in [lo, hi) (a selection
// phase's, once its forward is done: several GB of prepared ciphertexts a
// phase). Weights still loading are kept, and so are the projections V,
// which weights of later phases with the same n share. Party 0 keeps its
// record of the uploads, so a later request for a released id is refused
// (ErrWeightResent) rather than uploaded again.
func (h *Lattice) Release(lo, hi uint64) {
	if lo >= hi {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, e := range h.cache {
		if key.matrix == he.MatrixProj || key.id < lo || key.id >= hi || e.pending {
			continue // a pending one is about to be used
		}
		delete(h.cache, key)
		h.stats.Released++
		if e.w != nil {
			h.stats.HeldBytes -= e.w.Bytes()
		}
	}
}

// String names the encryption key stands for (in errors).
func (key heKey) String() string {
	if key.matrix == he.MatrixProj {
		return fmt.Sprintf("encrypted projection rows [%d, %d) for %d columns (offset %d, NW %d, KW %d)", key.row0, key.row1, key.n, key.off, key.nw, key.kw)
	}
	return fmt.Sprintf("encrypted weight %d (%v %d×%d: %v, offset %d, NW %d, KW %d)", key.id, key.kind, key.k, key.n, key.matrix, key.off, key.nw, key.kw)
}
