package ot

import (
	"encoding/binary"
	"fmt"
)

// The OT extension: SoftSpokenOT (L. Roy, "SoftSpokenOT: Quieter OT
// Extension from Small-Field Silent VOLE in the Minicrypt Model", CRYPTO
// 2022, ePrint 2022/192), semi-honest, producing the same correlation as
// IKNP: the extension receiver gets rows t_j, the sender (holding Δ) rows
// q_j = t_j ⊕ r_j·Δ, r_j the receiver's choice bit of OT j.
//
// Δ's 128 bits are cut into trees of k bits (the last tree takes what is
// left when k does not divide 128). Tree b is a GGM tree of 2^k leaves
// built by the receiver from a fresh root, its depth ℓ tied to base OT
// i = off_b + k − ℓ, where the sender chose with Δ_i; the sender learns
// every leaf but the one at α_b = Σ_j Δ_{off_b+j}·2^j (a punctured PRF).
// For every 128 OTs (block index c) each leaf s_x yields one block of
// pseudorandom bits r_x = G(s_x, c), one bit per OT, and
//
//	receiver: u_b = ⊕_x r_x,   v_{b,j} = ⊕_{x: bit j of x} r_x
//	sender:   w_{b,j} = ⊕_{x ≠ α_b} (bit j of x⊕α_b)·r_x = v_{b,j} ⊕ α_{b,j}·u_b
//
// (the sender never needs r_{α_b}, whose coefficient is zero). The receiver
// sends c_b = u_b ⊕ r for every tree: 128/k bits per OT instead of IKNP's
// 128. Column off_b+j of the receiver's matrix is v_{b,j}, of the sender's
// w_{b,j} ⊕ α_{b,j}·c_b = v_{b,j} ⊕ α_{b,j}·r; transposed, the rows are
// t_j and q_j = t_j ⊕ r_j·Δ. At k = 1 this is IKNP with GGM-grown seeds.
//
// Trees are made per generator, in its first extension call in each
// direction: the receiver's first message carries, for each base OT i,
// e_0 ‖ e_1 with e_c = K_c ⊕ M(m_i^{1−c}, gen), K_c the XOR of the nodes of
// parity c at the OT's depth and M a mask derived from the base-OT seed
// m_i and the generator id (512 words in all, whatever k). The sender,
// holding m_i^{Δ_i}, opens K_{1−Δ_i}: the sibling of its path at that
// depth. Generators therefore have independent trees, as IKNP's
// generators had independent column keys.
//
// PRGs: every expansion is the fixed-key AES hash G(s, τ) = π(s⊕τ)⊕s⊕τ
// (π AES-128 under the session's public PRG key, as libOTe's SoftSpokenOT
// uses it) with domain-separated tweaks τ: (c, 0) for the leaves' blocks,
// (child bit, spokenGGM) for the tree's children, (generator id,
// spokenMask) for the seed masks. Secure in the ideal-permutation model,
// as the correlation-robust hash already is (doc.go, Security).

// spokenK is SoftSpokenOT's k, the bits of Δ per tree: 4 bytes of
// extension matrix per OT (32 bits against IKNP's 128) and 2^k/k = 4 AES
// blocks of leaf PRG per OT at each party; bench/TWOHOSTS.md, step 7, has
// the count that chose it.
const spokenK = 4

// maxSpokenK bounds k (2^k leaves per tree are expanded for every 128 OTs).
const maxSpokenK = 10

// Tweak domains of the PRG G (the high word of τ).
const (
	spokenLeaf uint64 = 0
	spokenGGM  uint64 = 1 << 63
	spokenMask uint64 = 1 << 62
)

// treeWords is the size of the tree message: two blocks per base OT.
const treeWords = 4 * baseCount

// spoken is the public shape of the extension: how Δ is cut into trees.
type spoken struct {
	k     int
	sizes []int // bits of each tree; they sum to 128
	offs  []int // first Δ bit (and base OT) of each tree
	// leafOff[b] is the first leaf of tree b in a flat array of all trees'
	// leaves (Σ 2^size), leafOff[len] the total.
	leafOff []int
}

func newSpoken(k int) (*spoken, error) {
	if k < 1 || k > maxSpokenK {
		return nil, fmt.Errorf("ot: SoftSpokenOT k = %d, want 1…%d", k, maxSpokenK)
	}
	p := &spoken{k: k}
	for off := 0; off < baseCount; off += k {
		sz := min(k, baseCount-off)
		p.sizes = append(p.sizes, sz)
		p.offs = append(p.offs, off)
		p.leafOff = append(p.leafOff, 0)
	}
	p.leafOff = append(p.leafOff, 0)
	for b, sz := range p.sizes {
		p.leafOff[b+1] = p.leafOff[b] + 1<<sz
	}
	return p, nil
}

func mustSpoken(k int) *spoken {
	p, err := newSpoken(k)
	if err != nil {
		panic(err)
	}
	return p
}

// trees returns the number of trees, the bits of correction per OT.
func (p *spoken) trees() int { return len(p.sizes) }

// id is the byte that names the extension in the setup configuration:
// 0xc0 | k, SoftSpokenOT with the consistency check (kos.go). Versions
// before the check sent 0x80 | k, IKNP before SoftSpokenOT 0: a peer of
// either fails setup with ErrModeMismatch (its extension would accept
// corrections the check refuses, and send none of the check's words).
func (p *spoken) id() byte { return spokenChecked | byte(p.k) }

// The high bits of the extension's configuration byte.
const (
	spokenUnchecked byte = 0x80 // SoftSpokenOT without the check (older versions)
	spokenChecked   byte = 0xc0 // with it
	// silentFlag: the generators draw from Ferret silent-OT pools that
	// SoftSpokenOT bootstraps (ferret_pool.go).
	silentFlag byte = 0x20
)

// extensionName names the extension of a setup configuration byte.
func extensionName(b byte) string {
	k := int(b & 0x1f)
	switch {
	case b == 0:
		return "IKNP (a version before SoftSpokenOT)"
	case k < 1 || k > maxSpokenK:
	case b&0xe0 == spokenChecked|silentFlag:
		return fmt.Sprintf("Ferret silent OT bootstrapped by SoftSpokenOT k=%d with the consistency check", k)
	case b&0xe0 == spokenChecked:
		return fmt.Sprintf("SoftSpokenOT k=%d with the consistency check", k)
	case b&0xe0 == spokenUnchecked:
		return fmt.Sprintf("SoftSpokenOT k=%d without the consistency check (a version before it)", k)
	}
	return fmt.Sprintf("unknown (%#x)", b)
}

// matrixWords is the cost of the extension: the words the receiver sends
// for n OTs (n a multiple of 128), one bit per tree and OT. With k = 4 that
// is 4 bytes per OT (IKNP: 16); the first call of a generator in each
// direction adds the trees (treeWords).
func (p *spoken) matrixWords(n int) int { return n / 64 * p.trees() }

// blockOf reads the 16 bytes of a base-OT seed as a Block.
func blockOf(s [seedLen]byte) Block {
	return Block{binary.LittleEndian.Uint64(s[:8]), binary.LittleEndian.Uint64(s[8:])}
}

// prgBlocks sets out[i] = G(in[i]) = π(in[i])⊕in[i] (the caller has xored
// the tweak into in). in and out must not overlap.
func prgBlocks(pi *fixedAES, out, in []Block) {
	pi.encrypt(out, in)
	for i := range out {
		out[i] = out[i].xor(in[i])
	}
}

// seedMask is M(m, gen): the mask of a tree message under base-OT seed m.
func seedMask(pi *fixedAES, m [seedLen]byte, gen uint32) Block {
	in := []Block{blockOf(m).xor(Block{uint64(gen), spokenMask})}
	out := make([]Block, 1)
	prgBlocks(pi, out, in)
	return out[0]
}

// expandLevel sets child[2p+c] = G(node[p] ⊕ (c, spokenGGM)) for every p.
func expandLevel(pi *fixedAES, child, node []Block) {
	in := make([]Block, 2*len(node))
	for p, s := range node {
		in[2*p] = s.xor(Block{0, spokenGGM})
		in[2*p+1] = s.xor(Block{1, spokenGGM})
	}
	prgBlocks(pi, child, in)
}

// growTrees builds the receiver's trees from roots (one block per tree) and
// returns every tree's leaves (flat, leafOff) and the tree message: for base
// OT i, blocks 2i and 2i+1 are e_0 and e_1 as words.
func (p *spoken) growTrees(pi *fixedAES, roots []Block, seeds *[baseCount][2][seedLen]byte, gen uint32) (leaves []Block, msg []uint64) {
	leaves = make([]Block, p.leafOff[p.trees()])
	msg = make([]uint64, treeWords)
	for b, size := range p.sizes {
		node := []Block{roots[b]}
		for l := 1; l <= size; l++ {
			child := make([]Block, 2*len(node))
			expandLevel(pi, child, node)
			var K [2]Block
			for q, s := range child {
				K[q&1] = K[q&1].xor(s)
			}
			i := p.offs[b] + size - l
			for c := range 2 {
				e := K[c].xor(seedMask(pi, seeds[i][1-c], gen))
				msg[4*i+2*c], msg[4*i+2*c+1] = e.Lo, e.Hi
			}
			node = child
		}
		copy(leaves[p.leafOff[b]:], node)
	}
	return leaves, msg
}

// alpha returns tree b's punctured point: its bits of Δ.
func (p *spoken) alpha(delta Block, b int) int {
	a := 0
	for j := range p.sizes[b] {
		a |= int(bitOf(delta, p.offs[b]+j)) << j
	}
	return a
}

// puncture rebuilds the sender's trees from the tree message msg (any
// words: every message is valid) and its seeds m_i^{Δ_i}. It returns every
// tree's leaves in the sender's order: slot y of tree b holds leaf y⊕α_b,
// and slot 0 (the punctured leaf) is zero.
func (p *spoken) puncture(pi *fixedAES, msg []uint64, seeds *[baseCount][seedLen]byte, delta Block, gen uint32) []Block {
	leaves := make([]Block, p.leafOff[p.trees()])
	for b, size := range p.sizes {
		alpha := p.alpha(delta, b)
		var node []Block // depth l−1, the path's node zero
		for l := 1; l <= size; l++ {
			child := make([]Block, 1<<l)
			if l > 1 {
				expandLevel(pi, child, node)
			}
			path := alpha >> (size - l) // the path's node at depth l
			i := p.offs[b] + size - l
			c := 1 - path&1 // the parity the sender can open: 1 − Δ_i
			K := Block{msg[4*i+2*c], msg[4*i+2*c+1]}.xor(seedMask(pi, seeds[i], gen))
			// The path's parent was zero, so its children are garbage:
			// clear them, then the sibling is K minus the other nodes of
			// its parity.
			child[path], child[path^1] = Block{}, Block{}
			for q := c; q < len(child); q += 2 {
				K = K.xor(child[q])
			}
			child[path^1] = K
			node = child
		}
		dst := leaves[p.leafOff[b]:p.leafOff[b+1]]
		for y := 1; y < len(dst); y++ {
			dst[y] = node[y^alpha]
		}
	}
	return leaves
}

// reduceTree sets v[j] = ⊕ of r[x] over the x with bit j set, for the
// 2^len(v) leaf outputs r, and returns ⊕ r[x]. r may be destroyed.
func reduceTree(r []Block, v []Block) Block {
	if len(v) == 4 {
		return reduce16((*[16]Block)(r), (*[4]Block)(v))
	}
	n := len(r)
	for j := range v {
		var acc Block
		h := n / 2
		for i := range h {
			a, b := r[2*i], r[2*i+1]
			acc.Lo ^= b.Lo
			acc.Hi ^= b.Hi
			r[i] = Block{a.Lo ^ b.Lo, a.Hi ^ b.Hi}
		}
		v[j] = acc
		n = h
	}
	return r[0]
}

// reduce16 is reduceTree for trees of 4 bits (k = 4), unrolled on each
// word: 26 XORs per word, the pair sums in registers.
func reduce16(r *[16]Block, v *[4]Block) Block {
	var u Block
	u.Lo = reduce16Word(r[0].Lo, r[1].Lo, r[2].Lo, r[3].Lo, r[4].Lo, r[5].Lo, r[6].Lo, r[7].Lo,
		r[8].Lo, r[9].Lo, r[10].Lo, r[11].Lo, r[12].Lo, r[13].Lo, r[14].Lo, r[15].Lo,
		&v[0].Lo, &v[1].Lo, &v[2].Lo, &v[3].Lo)
	u.Hi = reduce16Word(r[0].Hi, r[1].Hi, r[2].Hi, r[3].Hi, r[4].Hi, r[5].Hi, r[6].Hi, r[7].Hi,
		r[8].Hi, r[9].Hi, r[10].Hi, r[11].Hi, r[12].Hi, r[13].Hi, r[14].Hi, r[15].Hi,
		&v[0].Hi, &v[1].Hi, &v[2].Hi, &v[3].Hi)
	return u
}

// reduce16Word is reduce16 on one word of each leaf.
func reduce16Word(r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11, r12, r13, r14, r15 uint64, v0, v1, v2, v3 *uint64) uint64 {
	*v0 = r1 ^ r3 ^ r5 ^ r7 ^ r9 ^ r11 ^ r13 ^ r15
	a0, a1, a2, a3 := r0^r1, r2^r3, r4^r5, r6^r7
	a4, a5, a6, a7 := r8^r9, r10^r11, r12^r13, r14^r15
	*v1 = a1 ^ a3 ^ a5 ^ a7
	b0, b1, b2, b3 := a0^a1, a2^a3, a4^a5, a6^a7
	*v2 = b1 ^ b3
	c1 := b2 ^ b3
	*v3 = c1
	return b0 ^ b1 ^ c1
}

// spokenScratch holds one party's buffers of one 128-OT block (reused
// across calls; a generator's calls are serialized).
type spokenScratch struct {
	out  []Block
	cols [baseCount]Block
}

// leafBlocks returns π(leaves[x] ⊕ (counter, spokenLeaf)) for every leaf:
// the leaves' bits of the 128 OTs of block index counter, before the
// feed-forward ⊕ leaves[x] ⊕ τ of G, which the tree sums add once per tree
// (seedSums).
func (s *spokenScratch) leafBlocks(pi *fixedAES, leaves []Block, counter uint64) []Block {
	if len(s.out) < len(leaves) {
		s.out = make([]Block, len(leaves))
	}
	out := s.out[:len(leaves)]
	pi.encryptTweaked(out, leaves, Block{counter, spokenLeaf})
	return out
}

// seedSums returns, per tree b at sums[offs[b]+b:], the tree sums of the
// leaves themselves (u, then v_0…v_{size−1}, as reduceTree computes them
// from leaf outputs): G's feed-forward, added to the sums of π's outputs.
// The tweak τ of the feed-forward cancels in every sum of an even number of
// leaves; v_j sums 2^(size−1) leaves, so it stays for trees of one bit
// (extendSums).
func (p *spoken) seedSums(leaves []Block) []Block {
	sums := make([]Block, p.trees()+baseCount)
	r := append([]Block(nil), leaves...)
	for b, size := range p.sizes {
		o := p.offs[b] + b
		sums[o] = reduceTree(r[p.leafOff[b]:p.leafOff[b+1]], sums[o+1:o+1+size])
	}
	return sums
}

// treeSums computes tree b's u and v (w at the sender) for the 128 OTs of
// block index counter from the leaves' π outputs out (out[0] zeroed at the
// sender, whose slot 0 is the punctured leaf) into v, and returns u.
func (p *spoken) treeSums(b int, out, sums []Block, counter uint64, v []Block) Block {
	size := p.sizes[b]
	u := reduceTree(out[p.leafOff[b]:p.leafOff[b+1]], v[:size])
	o := p.offs[b] + b
	for j := range size {
		v[j] = v[j].xor(sums[o+1+j])
	}
	if size == 1 {
		v[0] = v[0].xor(Block{counter, spokenLeaf})
	}
	return u.xor(sums[o])
}

// extSender is this party's side of the extension as the OT sender.
type extSender struct {
	delta  Block
	shape  *spoken
	pi     *fixedAES
	gen    uint32
	seeds  *[baseCount][seedLen]byte
	leaves []Block // nil until the first call (sender's order, see puncture)
	sums   []Block // seedSums(leaves)
	alphas []int
	next   uint64 // index of the next OT (the hash tweak), a multiple of 128
	sc     spokenScratch
}

// extReceiver is this party's side as the OT receiver.
type extReceiver struct {
	shape  *spoken
	pi     *fixedAES
	gen    uint32
	seeds  *[baseCount][2][seedLen]byte
	secret func(n int) []uint64 // fresh secret words: the trees' roots, the check's extra choices
	leaves []Block              // nil until the first call
	sums   []Block              // seedSums(leaves)
	next   uint64
	sc     spokenScratch
}

// callWords returns the words the receiver sends in a call of n OTs (n a
// multiple of 128; nothing when n is 0): the corrections of n + checkOTs
// OTs, the trees in the generator's first call (first), and the check's x
// and t (kos.go).
func (p *spoken) callWords(n int, first bool) int {
	if n == 0 {
		return 0
	}
	w := p.matrixWords(n+checkOTs) + checkWords
	if first {
		w += treeWords
	}
	return w
}

// words returns the words the receiver sends for n more OTs.
func (r *extReceiver) words(n int) int { return r.shape.callWords(n, r.leaves == nil) }

// words returns the words the sender receives for n more OTs.
func (s *extSender) words(n int) int { return s.shape.callWords(n, s.leaves == nil) }

// extend (receiver) takes n choice bits (n a multiple of 128, packed 64 per
// word) and returns the message to send (the trees on the first call, then
// c_b for every 128-OT block and tree, then the check's x and t), the rows
// t_j of the n OTs and the index of the first OT. The call extends
// n + checkOTs OTs, the extra ones with uniform choice bits, for the check
// (kos.go); their rows are dropped.
func (r *extReceiver) extend(choices []uint64, n int) (msg []uint64, t []Block, j0 uint64) {
	return r.extendTo(nil, choices, n)
}

// extendTo is extend with the message appended to dst (its spare capacity
// used when it has r.words(n) words of it) and the rows t in scratch
// memory: t has length n and the capacity of all n + checkOTs rows, so
// putBlocks(t) hands them all back.
func (r *extReceiver) extendTo(dst, choices []uint64, n int) (msg []uint64, t []Block, j0 uint64) {
	if n == 0 {
		return dst, nil, r.next
	}
	msg, t, all, j0 := r.extendRows(dst, choices, n)
	x, ts := checkReceiver(newChallenge(r.pi, r.gen, j0, len(t), msg[len(dst):]), t, all)
	msg = append(msg, x.Lo, x.Hi, ts.Lo, ts.Hi)
	return msg, t[:n], j0
}

// extendRows is extend (n > 0) before the check: the message without x and
// t (appended to dst), and the rows (scratch memory, see extendTo) and
// choice bits of all n + checkOTs OTs.
func (r *extReceiver) extendRows(dst, choices []uint64, n int) (msg []uint64, t []Block, all []uint64, j0 uint64) {
	j0 = r.next
	p := r.shape
	total := n + checkOTs
	r.next += uint64(total)
	msg = dst
	if cap(msg)-len(msg) < r.words(n) {
		msg = append(make([]uint64, 0, len(dst)+r.words(n)), dst...)
	}
	if r.leaves == nil {
		rw := r.secret(2 * p.trees())
		roots := make([]Block, p.trees())
		for b := range roots {
			roots[b] = Block{rw[2*b], rw[2*b+1]}
		}
		var tm []uint64
		r.leaves, tm = p.growTrees(r.pi, roots, r.seeds, r.gen)
		r.sums = p.seedSums(r.leaves)
		msg = append(msg, tm...)
	}
	all = append(choices[:n/64:n/64], r.secret(checkOTs/64)...)
	t = getBlocks(total)
	for c := range total / 128 {
		counter := j0/128 + uint64(c)
		out := r.sc.leafBlocks(r.pi, r.leaves, counter)
		ch := Block{all[2*c], all[2*c+1]}
		for b, size := range p.sizes {
			u := p.treeSums(b, out, r.sums, counter, r.sc.cols[p.offs[b]:p.offs[b]+size]).xor(ch)
			msg = append(msg, u.Lo, u.Hi)
		}
		transpose128(t[128*c:128*c+128], &r.sc.cols)
	}
	return msg, t, all, j0
}

// extend (sender) takes the receiver's message for n OTs (exactly
// s.words(n) words) and returns the rows q_j = t_j ⊕ r_j·Δ of the n OTs and
// the index of the first OT, after the consistency check of the call's
// n + checkOTs OTs (kos.go); when the check fails it returns an error
// wrapping ErrExtensionCheck and no rows. The rows are scratch memory of
// the capacity of all n + checkOTs rows (putBlocks hands them back).
func (s *extSender) extend(msg []uint64, n int) (q []Block, j0 uint64, err error) {
	j0 = s.next
	if n == 0 {
		return nil, j0, nil
	}
	if len(msg) != s.words(n) {
		return nil, j0, fmt.Errorf("extension message of %d words for %d OTs, want %d", len(msg), n, s.words(n))
	}
	p := s.shape
	total := n + checkOTs
	s.next += uint64(total)
	body, xt := msg[:len(msg)-checkWords], msg[len(msg)-checkWords:]
	corr := body
	if s.leaves == nil {
		s.leaves = p.puncture(s.pi, body[:treeWords], s.seeds, s.delta, s.gen)
		s.sums = p.seedSums(s.leaves)
		s.alphas = make([]int, p.trees())
		for b := range s.alphas {
			s.alphas[b] = p.alpha(s.delta, b)
		}
		corr = body[treeWords:]
	}
	q = getBlocks(total)
	var w [maxSpokenK]Block
	T := p.trees()
	for c := range total / 128 {
		counter := j0/128 + uint64(c)
		out := s.sc.leafBlocks(s.pi, s.leaves, counter)
		for b, size := range p.sizes {
			out[p.leafOff[b]] = Block{} // the punctured leaf (its slot's input was zero)
			p.treeSums(b, out, s.sums, counter, w[:size])
			cb := Block{corr[2*(c*T+b)], corr[2*(c*T+b)+1]}
			a := s.alphas[b]
			for j := range size {
				m := -uint64(a >> j & 1)
				s.sc.cols[p.offs[b]+j] = Block{w[j].Lo ^ cb.Lo&m, w[j].Hi ^ cb.Hi&m}
			}
		}
		transpose128(q[128*c:128*c+128], &s.sc.cols)
	}
	x, t := Block{xt[0], xt[1]}, Block{xt[2], xt[3]}
	if !checkSender(newChallenge(s.pi, s.gen, j0, total, body), q, s.delta, x, t) {
		putBlocks(q)
		return nil, j0, fmt.Errorf("OTs %d…%d: %w", j0, j0+uint64(total)-1, ErrExtensionCheck)
	}
	return q[:n], j0, nil
}
