package ot

import (
	"context"
	"errors"
	"fmt"

	"github.com/selectformer/selectformer/share"
)

// Ferret silent correlated-OT extension (Yang, Weng, Lan, Zhang and Wang,
// ACM CCS 2020, ePrint 2020/924): primal LPN with regular noise and a
// local linear code of d = 10 nonzeros per column. This file is the core
// (an instance's iterations); ferret_pool.go serves a session's generators
// from it.
//
// An iteration of a parameter set (ferretParams: n, k, t, logBin) turns a
// reserve of k + t·logBin + 128 Δ-correlated OTs into n new ones:
//
//  1. MPCOT with regular noise: t SPCOTs by GGM tree (ferret_spcot.go),
//     one per bin of 2^logBin positions; the receiver's point in each bin
//     is uniform, so the noise e has exactly one 1 per bin. Each tree
//     consumes logBin reserve COTs (reserve[k + b·logBin + l − 1] for tree
//     b's level l).
//  2. The consistency check of the MPCOT (ferret_check.go), on the last
//     128 reserve COTs, before anything of the iteration is used.
//  3. LPN encoding (ferret_lpn.go) of the reserve's first k COTs with the
//     public local code A of the iteration.
//
// Of the n outputs the first n − R are handed out and the last R = the
// next iteration's reserve() are kept as its base (bootstrapping). With a
// setup set, the first iteration runs it on the caller's base COTs and
// keeps the main set's reserve.
//
// Messages of an iteration: two each way, two round trips. The receiver
// sends the t·logBin derandomisation bits of the trees' base COTs
// (spcotRoundWords words); the sender answers with 2 masked level sums
// per tree level and 1 leaf correction per tree (spcotReplyWords words);
// the receiver sends the check's seed and its VOLE adjustment x′ (32
// bytes, ferretCheckUpWords), which must follow the reply; the sender
// answers with its SHA-256 hash (32 bytes, ferretCheckDownWords). Each
// receive is bounded by the exact size the public parameters give and
// checked before anything of it is used. For ferretMain that is 2,112
// bytes from the receiver and 552,992 from the sender for 10,016,992
// COTs: 0.443 bits per COT (555,104 bytes; 0.4433 before the check).
//
// Security. The sender's messages are masked sums under the
// correlation-robust hash (tweaks j0, j0+1, … counted over the instance's
// life, under a generator id (ferretKeys.gen) no other hasher of the
// session may use, so no (tweak, Δ) pair repeats), the leaf corrections
// c = Δ ⊕ ⊕ v, which the one unknown leaf hides, and a hash of V that an
// honest receiver can compute itself; the receiver's are its base choices
// xored with its points' bits, a public seed and x* ⊕ u, all uniform. An
// active sender (the party holding Δ) can send inconsistent level sums or
// corrections so that the receiver's outputs are wrong depending on its
// points; the check catches that: the receiver goes on only when its
// points fit the one guess the sender's hash amounts to, and otherwise
// fails with errFerretCheck and the instance is broken. So the sender
// learns at most one bit about the noise, whether its guess held, once
// (Ferret's malicious MPCOT, whose LPN assumption allows that leak; the
// argument is in ferret_check.go). An active receiver needs no check: a
// wrong d only changes which sum it learns (a different point, still one
// per tree), and a wrong x′ only makes the sender's hash one of a value
// that differs from what it can compute by a multiple of Δ it cannot
// compute. What the check does not cover: the base COTs of the first
// iteration are trusted to be Δ-correlated COTs (an active-secure
// extension must make them), and a failed check is an abort, not a
// recovery: the caller must end the session.

// ferretConn carries an iteration's messages. recv returns the next
// message of at most maxWords words and must refuse a longer one with an
// error (a bound computed from the public parameters); the callers then
// check its exact size before decoding it.
type ferretConn interface {
	send(ctx context.Context, msg []uint64) error
	recv(ctx context.Context, maxWords int) ([]uint64, error)
}

// ferretKeys is the public material both parties of an instance share:
// the GGM PRG's fixed-key permutation π′, the correlation-robust hash's
// permutation π and the tweak domain (generator id) of its hashes, and
// the seed of the public LPN codes.
type ferretKeys struct {
	prg, hash *fixedAES
	gen       uint32
	code      share.Seed
}

// errFerretBroken is returned by every call after an iteration failed
// part way: the instance's reserve and tweak counter are then not what
// the peer's are.
var errFerretBroken = errors.New("ot: ferret: an earlier iteration failed")

// ferretSender is the party holding Δ: its reserve is the Q side of the
// next iteration's base COTs.
type ferretSender struct {
	cfg     ferretConfig
	cur     ferretParams // the next iteration's set
	keys    ferretKeys
	hash    *hasher
	rand    *share.PRG // secret: the trees' roots
	delta   Block
	reserve []Block
	out     []Block // an iteration's outputs, reused (extend's result)
	iter    uint64  // iterations run (the LPN code's index)
	tweak   uint64  // hash tweaks used
	broken  bool
}

// ferretReceiver is the party choosing: its reserve is the choices and T
// side of the next iteration's base COTs.
type ferretReceiver struct {
	cfg      ferretConfig
	cur      ferretParams
	keys     ferretKeys
	hash     *hasher
	rand     *share.PRG // secret: the noise points (and the check's seeds, public once sent)
	reserveU []uint64   // choices, packed
	reserveT []Block
	out      []Block  // an iteration's T side, reused
	bits     []uint64 // an iteration's choices, reused
	iter     uint64
	tweak    uint64
	begun    *ferretBegun // the next iteration, begun (cfg.overlap)
	broken   bool
}

// newFerretSender starts an instance on the sender's part of base
// Δ-correlated OTs (at least cfg.baseCOTs(); the first are used). secret
// seeds the trees' roots and must be uniform and private.
func newFerretSender(cfg ferretConfig, keys ferretKeys, base DeltaOT, secret share.Seed) (*ferretSender, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	need := cfg.baseCOTs()
	if len(base.Q) < need {
		return nil, fmt.Errorf("ot: ferret: %d base COTs, need %d", len(base.Q), need)
	}
	return &ferretSender{
		cfg: cfg, cur: cfg.first(), keys: keys,
		hash:    newHasher(keys.hash, keys.gen),
		rand:    share.NewPRG(secret, "ot/ferret/sender"),
		delta:   base.Delta,
		reserve: append([]Block(nil), base.Q[:need]...),
	}, nil
}

// newFerretReceiver starts an instance on the receiver's part of base
// Δ-correlated OTs. secret seeds the noise points and must be uniform and
// private.
func newFerretReceiver(cfg ferretConfig, keys ferretKeys, base DeltaOT, secret share.Seed) (*ferretReceiver, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	need := cfg.baseCOTs()
	if len(base.T) < need || len(base.Choices) < share.PackedWords(need) {
		return nil, fmt.Errorf("ot: ferret: %d base COTs (%d choice words), need %d", len(base.T), len(base.Choices), need)
	}
	u := append([]uint64(nil), base.Choices[:share.PackedWords(need)]...)
	share.MaskTail(u, need)
	return &ferretReceiver{
		cfg: cfg, cur: cfg.first(), keys: keys,
		hash:     newHasher(keys.hash, keys.gen),
		rand:     share.NewPRG(secret, "ot/ferret/receiver"),
		reserveU: u,
		reserveT: append([]Block(nil), base.T[:need]...),
	}, nil
}

// extend runs one iteration and returns its usable COTs' Q side (the
// sender's z). The result lies in the instance's output buffer, reused by
// the next call (a fresh buffer of 168 MB per main-set iteration costs
// more in page faults than the iteration's trees): it is valid until then.
// The sender answers the receiver's check but learns nothing from it: a
// receiver whose check fails stops, and the session must end with it.
func (s *ferretSender) extend(ctx context.Context, conn ferretConn) ([]Block, error) {
	if s.broken {
		return nil, errFerretBroken
	}
	s.broken = true // until the iteration completes
	p := s.cur
	s.out = reuseBlocks(s.out, p.n)
	leaves := s.out
	roots := make([]Block, p.t)
	fillBlocks(s.rand, roots)
	sp := growSPCOT(p, newFerretTrees(s.keys.prg, p.logBin), leaves, roots)

	msg, err := conn.recv(ctx, spcotRoundWords(p))
	if err != nil {
		return nil, fmt.Errorf("ot: ferret: receive tree choices: %w", err)
	}
	d, err := decodeSPCOTBits(p, msg)
	if err != nil {
		return nil, err
	}
	reply := sp.reply(s.hash, s.delta, s.reserve[p.k:p.checkFirst()], d, s.tweak)
	if err := conn.send(ctx, reply); err != nil {
		return nil, fmt.Errorf("ot: ferret: send tree reply: %w", err)
	}
	msg, err = conn.recv(ctx, ferretCheckUpWords)
	if err != nil {
		return nil, fmt.Errorf("ot: ferret: receive check challenge: %w", err)
	}
	seed, adj, err := decodeFerretCheckUp(msg)
	if err != nil {
		return nil, err
	}
	chi, err := newFerretChi(seed, s.keys.gen, s.iter)
	if err != nil {
		return nil, err
	}
	h := checkSenderHash(chi, leaves, s.reserve[p.checkFirst():p.reserve()], adj, s.delta, s.keys.gen, s.iter)
	if err := conn.send(ctx, h); err != nil {
		return nil, fmt.Errorf("ot: ferret: send check hash: %w", err)
	}
	code, err := newLPNCode(s.keys.code, s.iter, p.k)
	if err != nil {
		return nil, err
	}
	code.encode(leaves, s.reserve[:p.k], nil, nil)

	next := s.cfg.at(s.iter + 1)
	m := p.n - next.reserve()
	s.reserve = append(s.reserve[:0], leaves[m:]...)
	s.tweak += uint64(p.treeOTs())
	s.iter++
	s.cur = next
	s.broken = false
	return leaves[:m:m], nil
}

// extend runs one iteration and returns its usable COTs' choices (packed)
// and T side (the receiver's x and z'), valid until the next call, which
// reuses their buffers. When the sender's messages fail the consistency
// check it returns no COTs and an error wrapping errFerretCheck, and the
// instance refuses every later call.
func (r *ferretReceiver) extend(ctx context.Context, conn ferretConn) (choices []uint64, t []Block, err error) {
	if r.broken {
		return nil, nil, errFerretBroken
	}
	r.broken = true
	p := r.cur
	bg := r.begun
	r.begun = nil
	if bg == nil {
		if bg, err = r.begin(ctx, conn, p); err != nil {
			return nil, nil, err
		}
	}
	msg, err := conn.recv(ctx, spcotReplyWords(p))
	if err != nil {
		return nil, nil, fmt.Errorf("ot: ferret: receive tree reply: %w", err)
	}
	sums, corr, err := decodeSPCOTReply(p, msg)
	if err != nil {
		return nil, nil, err
	}
	r.out = reuseBlocks(r.out, p.n)
	leaves := r.out
	bg.sr.finish(newFerretTrees(r.keys.prg, p.logBin), r.hash, leaves, sums, corr, r.tweak)
	W, err := r.challenge(ctx, conn, p, bg.alpha, leaves)
	if err != nil {
		return nil, nil, err
	}
	if cap(r.bits) < share.PackedWords(p.n) {
		r.bits = make([]uint64, share.PackedWords(p.n))
	}
	bits := r.bits[:share.PackedWords(p.n)]
	clear(bits)
	for b, a := range bg.alpha {
		j := b<<p.logBin + a
		bits[j>>6] |= 1 << (j & 63)
	}
	code, err := newLPNCode(r.keys.code, r.iter, p.k)
	if err != nil {
		return nil, nil, err
	}
	code.encode(leaves, r.reserveT[:p.k], bits, r.reserveU)

	next := r.cfg.at(r.iter + 1)
	m := p.n - next.reserve()
	r.reserveU = extractBits(bits, m, next.reserve())
	r.reserveT = append(r.reserveT[:0], leaves[m:]...)
	if r.cfg.overlap {
		// The next iteration's choices message is masked by choice bits
		// of this one's reserve, which depend on the receiver's secrets
		// (its noise points and LPN secret) only: a sender that cheated
		// in this iteration learns nothing more from it.
		if r.begun, err = r.begin(ctx, conn, next); err != nil {
			return nil, nil, err
		}
	}
	if err := r.verify(ctx, conn, W); err != nil {
		return nil, nil, err
	}
	choices = bits[:share.PackedWords(m):share.PackedWords(m)]
	share.MaskTail(choices, m)
	r.tweak += uint64(p.treeOTs())
	r.iter++
	r.cur = next
	r.broken = false
	return choices, leaves[:m:m], nil
}

// ferretBegun is an iteration the receiver has begun: its noise points and
// the trees' receiver whose choices message it sent.
type ferretBegun struct {
	alpha []int
	sr    *spcotReceiver
}

// begin draws the noise points of the next iteration, on set p and the
// current reserve, and sends the trees' choices message.
func (r *ferretReceiver) begin(ctx context.Context, conn ferretConn, p ferretParams) (*ferretBegun, error) {
	alpha := make([]int, p.t)
	for b := range alpha {
		alpha[b] = int(r.rand.Uint64() & uint64(p.bin()-1))
	}
	treeU := extractBits(r.reserveU, p.k, p.treeOTs())
	sr, d := newSPCOTReceiver(p, alpha, treeU, r.reserveT[p.k:p.checkFirst()])
	if err := conn.send(ctx, d); err != nil {
		return nil, fmt.Errorf("ot: ferret: send tree choices: %w", err)
	}
	return &ferretBegun{alpha: alpha, sr: sr}, nil
}

// challenge runs the receiver's side of the iteration's consistency check
// (ferret_check.go) on its leaves w up to the sender's answer: it sends σ
// and x′ = x* ⊕ u and returns W, which verify compares with the sender's
// hash.
func (r *ferretReceiver) challenge(ctx context.Context, conn ferretConn, p ferretParams, alpha []int, w []Block) (Block, error) {
	seed := Block{r.rand.Uint64(), r.rand.Uint64()}
	chi, err := newFerretChi(seed, r.keys.gen, r.iter)
	if err != nil {
		return Block{}, err
	}
	var xs Block
	for b, a := range alpha {
		xs = xs.xor(chi.at(b<<p.logBin + a))
	}
	u := extractBits(r.reserveU, p.checkFirst(), ferretCheckOTs)
	if err := conn.send(ctx, []uint64{seed.Lo, seed.Hi, xs.Lo ^ u[0], xs.Hi ^ u[1]}); err != nil {
		return Block{}, fmt.Errorf("ot: ferret: send check challenge: %w", err)
	}
	return checkReceiverValue(chi, w, r.reserveT[p.checkFirst():p.reserve()]), nil
}

// verify receives the sender's check hash of the current iteration and
// compares it with H(W). A mismatch returns an error wrapping
// errFerretCheck.
func (r *ferretReceiver) verify(ctx context.Context, conn ferretConn, W Block) error {
	msg, err := conn.recv(ctx, ferretCheckDownWords)
	if err != nil {
		return fmt.Errorf("ot: ferret: receive check hash: %w", err)
	}
	got, err := decodeFerretCheckDown(msg)
	if err != nil {
		return err
	}
	if !checkHashMatches(W, got, r.keys.gen, r.iter) {
		return fmt.Errorf("%w (iteration %d)", errFerretCheck, r.iter)
	}
	return nil
}

// reuseBlocks returns b with length n, reallocated only when too short.
func reuseBlocks(b []Block, n int) []Block {
	if cap(b) < n {
		return make([]Block, n)
	}
	return b[:n]
}

// fillBlocks overwrites b with blocks of the stream.
func fillBlocks(prg *share.PRG, b []Block) {
	w := make([]uint64, 2*len(b))
	prg.Fill(w)
	for i := range b {
		b[i] = Block{w[2*i], w[2*i+1]}
	}
}

// extractBits returns bits from … from+count−1 of the packed src as a new
// packed vector of count bits (the bits past count zero).
func extractBits(src []uint64, from, count int) []uint64 {
	out := make([]uint64, share.PackedWords(count))
	w0, sh := from>>6, uint(from&63)
	for i := range out {
		v := src[w0+i] >> sh
		if sh != 0 && w0+i+1 < len(src) {
			v |= src[w0+i+1] << (64 - sh)
		}
		out[i] = v
	}
	share.MaskTail(out, count)
	return out
}
