package ot

import "fmt"

// Single-point correlated OT (SPCOT) by GGM tree, batched over the t bins
// of an iteration (Ferret §4, after Boyle, Couteau, Gilboa, Ishai, Kohl and
// Scholl, CCS 2019). The sender, who holds Δ, grows each bin's tree of
// depth h = logBin from a random root and gets its 2^h leaves v; the
// receiver, who holds the bin's secret point α, gets w[j] = v[j] for
// j ≠ α and w[α] = v[α] ⊕ Δ.
//
// Level l = 1…h of a tree has 2^l nodes; K_l^0 and K_l^1 are the sums of
// its even and odd nodes. The receiver chooses ¬α_l in the level's base
// COT (α_l is bit h−l of α, most significant first) and so learns
// K_l^{¬α_l}: from it and the nodes it already knows it rebuilds the
// sibling of α's path at level l, and with it every node off the path.
// A base COT is random (choice u, T = Q ⊕ u·Δ), so the receiver sends
// d = u ⊕ ¬α_l and the sender masks K_l^0 with H(Q ⊕ d·Δ) and K_l^1 with
// H(Q ⊕ ¬d·Δ), of which the receiver can compute exactly the one it
// chose, H(T). Finally the sender sends c = Δ ⊕ ⊕_j v[j] and the receiver
// sets w[α] = c ⊕ ⊕_{j≠α} w[j].

// ferretTreeTweak separates the GGM PRG's inputs from every other use of
// the fixed-key permutation (the softspoken trees use bits 63 and 62 of
// the high word): G_c(x) = π(x ⊕ τ_c) ⊕ x ⊕ τ_c with τ_c = (c, tweak).
const ferretTreeTweak uint64 = 0x46455252_45544747 // "FERRETGG"

// ferretTrees grows and punctures GGM trees of one depth with the
// length-doubling PRG G(x) = (G_0(x), G_1(x)) on fixed-key AES (π′, the
// extension's PRG key). It holds the scratch of one tree; not safe for
// concurrent use.
type ferretTrees struct {
	prg   *fixedAES
	depth int
	// buf is the level buffer the odd levels (counted from the leaves)
	// land in; a0 and a1 hold π(x ⊕ τ_c) for a level's parents.
	buf, a0, a1 []Block
}

func newFerretTrees(prg *fixedAES, depth int) *ferretTrees {
	half := 1 << (depth - 1)
	return &ferretTrees{prg: prg, depth: depth, buf: make([]Block, 1<<depth), a0: make([]Block, half), a1: make([]Block, half)}
}

// level returns the buffer level l of a tree with leaves in leaves lands
// in: the leaves' own slice when depth−l is even, the scratch otherwise,
// so that level depth is the leaves and each level expands into the
// other buffer.
func (g *ferretTrees) level(leaves []Block, l int) []Block {
	if (g.depth-l)&1 == 0 {
		return leaves[:1<<l]
	}
	return g.buf[:1<<l]
}

// expand sets child[2p+c] = G_c(parent[p]) for every parent p.
func (g *ferretTrees) expand(child, parent []Block) {
	w := len(parent)
	t0, t1 := Block{0, ferretTreeTweak}, Block{1, ferretTreeTweak}
	a0, a1 := g.a0[:w], g.a1[:w]
	g.prg.encryptTweaked(a0, parent, t0)
	g.prg.encryptTweaked(a1, parent, t1)
	for p, x := range parent {
		child[2*p] = Block{a0[p].Lo ^ x.Lo, a0[p].Hi ^ x.Hi ^ ferretTreeTweak}
		child[2*p+1] = Block{a1[p].Lo ^ x.Lo ^ 1, a1[p].Hi ^ x.Hi ^ ferretTreeTweak}
	}
}

// grow fills leaves (2^depth blocks) with the tree of root and sets
// sums[2(l−1)+c] = K_l^c for l = 1…depth. It returns the sum of the
// leaves.
func (g *ferretTrees) grow(leaves []Block, root Block, sums []Block) Block {
	g.level(leaves, 0)[0] = root
	var all Block
	for l := 1; l <= g.depth; l++ {
		parent, child := g.level(leaves, l-1), g.level(leaves, l)
		g.expand(child, parent)
		var k0, k1 Block
		for p := 0; p < len(child); p += 2 {
			k0 = k0.xor(child[p])
			k1 = k1.xor(child[p+1])
		}
		sums[2*(l-1)], sums[2*(l-1)+1] = k0, k1
		if l == g.depth {
			all = k0.xor(k1)
		}
	}
	return all
}

// puncture fills leaves (2^depth blocks) with the tree whose level sums
// known[l−1] = K_l^{¬α_l} the receiver learnt, every leaf but alpha's,
// which it leaves zero. It returns the sum of the leaves.
func (g *ferretTrees) puncture(leaves []Block, alpha int, known []Block) Block {
	// Level 1: the one node of parity ¬α_1 is K_1^{¬α_1} itself.
	path := 0 // α's prefix at the current level
	var all Block
	for l := 1; l <= g.depth; l++ {
		bit := alpha >> (g.depth - l) & 1
		child := g.level(leaves, l)
		if l > 1 {
			g.expand(child, g.level(leaves, l-1))
		}
		child[2*path], child[2*path+1] = Block{}, Block{}
		var s Block
		for p := 1 - bit; p < len(child); p += 2 {
			s = s.xor(child[p])
		}
		child[2*path+1-bit] = known[l-1].xor(s)
		path = 2*path + bit
		if l == g.depth {
			for _, x := range child {
				all = all.xor(x)
			}
		}
	}
	return all
}

// spcotRoundWords returns the words of the receiver's message of a batch
// of trees: the t·logBin derandomisation bits d, packed.
func spcotRoundWords(p ferretParams) int { return (p.treeOTs() + 63) / 64 }

// spcotReplyWords returns the words of the sender's reply: for each
// tree's level the two masked sums (2 blocks), then each tree's leaf
// correction c (1 block).
func spcotReplyWords(p ferretParams) int { return 4*p.treeOTs() + 2*p.t }

// decodeSPCOTBits checks the receiver's message (exactly
// spcotRoundWords words, the bits past t·logBin zero) and returns it.
func decodeSPCOTBits(p ferretParams, msg []uint64) ([]uint64, error) {
	if want := spcotRoundWords(p); len(msg) != want {
		return nil, fmt.Errorf("ot: ferret: tree choices of %d words, want %d", len(msg), want)
	}
	if r := uint(p.treeOTs()) & 63; r != 0 && msg[len(msg)-1]>>r != 0 {
		return nil, fmt.Errorf("ot: ferret: tree choices with bits set past the %d trees' levels", p.treeOTs())
	}
	return msg, nil
}

// decodeSPCOTReply checks the sender's reply (exactly spcotReplyWords
// words) and returns its masked sums (2·t·logBin blocks) and leaf
// corrections (t blocks).
func decodeSPCOTReply(p ferretParams, msg []uint64) (sums, corr []Block, err error) {
	if want := spcotReplyWords(p); len(msg) != want {
		return nil, nil, fmt.Errorf("ot: ferret: tree reply of %d words, want %d", len(msg), want)
	}
	blocks := make([]Block, len(msg)/2)
	for i := range blocks {
		blocks[i] = Block{msg[2*i], msg[2*i+1]}
	}
	return blocks[:2*p.treeOTs()], blocks[2*p.treeOTs():], nil
}

// spcotSender is the sender's half of a batch of t SPCOTs: the trees'
// leaves (t·2^logBin blocks, tree b's at b·2^logBin) and level sums, made
// before the receiver's message arrives.
type spcotSender struct {
	p      ferretParams
	leaves []Block
	sums   []Block // 2·logBin per tree: K_l^0, K_l^1
	total  []Block // each tree's sum of leaves
}

// growSPCOT grows the t trees of roots into leaves (n blocks).
func growSPCOT(p ferretParams, g *ferretTrees, leaves, roots []Block) *spcotSender {
	s := &spcotSender{p: p, leaves: leaves, sums: make([]Block, 2*p.treeOTs()), total: make([]Block, p.t)}
	h := p.logBin
	for b := range p.t {
		s.total[b] = g.grow(leaves[b<<h:(b+1)<<h], roots[b], s.sums[2*h*b:2*h*(b+1)])
	}
	return s
}

// reply answers the receiver's bits d with the masked sums and leaf
// corrections, given the trees' base COTs q (t·logBin blocks: tree b's
// level l is q[b·logBin + l − 1]) under delta, hashed with tweaks
// j0, j0+1, ….
func (s *spcotSender) reply(hs *hasher, delta Block, q []Block, d []uint64, j0 uint64) []uint64 {
	m := s.p.treeOTs()
	rows := make([]Block, m)
	for i := range rows {
		rows[i] = q[i]
		if d[i>>6]>>(i&63)&1 == 1 {
			rows[i] = rows[i].xor(delta)
		}
	}
	h0, h1 := make([]Block, m), make([]Block, m)
	hs.hashBlocks(h0, rows, Block{}, j0)
	hs.hashBlocks(h1, rows, delta, j0)
	msg := make([]uint64, spcotReplyWords(s.p))
	for i := range m {
		e0, e1 := s.sums[2*i].xor(h0[i]), s.sums[2*i+1].xor(h1[i])
		msg[4*i], msg[4*i+1], msg[4*i+2], msg[4*i+3] = e0.Lo, e0.Hi, e1.Lo, e1.Hi
	}
	for b, v := range s.total {
		c := v.xor(delta)
		msg[4*m+2*b], msg[4*m+2*b+1] = c.Lo, c.Hi
	}
	return msg
}

// spcotReceiver is the receiver's half of a batch: its points (α_b in
// [0, 2^logBin) for tree b) and its trees' base COTs.
type spcotReceiver struct {
	p      ferretParams
	alpha  []int
	u      []uint64 // base choices: bit i for tree OT i
	tBlk   []Block  // base T, one per tree OT
	choice []uint64 // ¬α bits, packed like u
}

// newSPCOTReceiver prepares the receiver's message for points alpha and
// the trees' base COTs (choices u, bit i for tree OT i, and T): d = u ⊕ ¬α.
func newSPCOTReceiver(p ferretParams, alpha []int, u []uint64, tBlk []Block) (*spcotReceiver, []uint64) {
	r := &spcotReceiver{p: p, alpha: alpha, u: u, tBlk: tBlk, choice: make([]uint64, spcotRoundWords(p))}
	h := p.logBin
	for b, a := range alpha {
		for l := 1; l <= h; l++ {
			if a>>(h-l)&1 == 0 {
				i := b*h + l - 1
				r.choice[i>>6] |= 1 << (i & 63)
			}
		}
	}
	d := make([]uint64, len(r.choice))
	for w := range d {
		d[w] = r.choice[w] ^ u[w]
	}
	if rem := uint(p.treeOTs()) & 63; rem != 0 {
		d[len(d)-1] &= 1<<rem - 1
	}
	return r, d
}

// finish rebuilds the trees from the sender's reply into leaves (n
// blocks): w[j] = v[j] off the points and w[α_b] = v[α_b] ⊕ Δ.
func (r *spcotReceiver) finish(g *ferretTrees, hs *hasher, leaves []Block, sums, corr []Block, j0 uint64) {
	m := r.p.treeOTs()
	ht := make([]Block, m)
	hs.hashBlocks(ht, r.tBlk[:m], Block{}, j0)
	known := make([]Block, m)
	for i := range known {
		c := r.choice[i>>6] >> (i & 63) & 1
		known[i] = sums[2*i+int(c)].xor(ht[i])
	}
	h := r.p.logBin
	for b, a := range r.alpha {
		tree := leaves[b<<h : (b+1)<<h]
		all := g.puncture(tree, a, known[b*h:(b+1)*h])
		tree[a] = corr[b].xor(all)
	}
}
