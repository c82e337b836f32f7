package protocol

import (
	"context"
	"fmt"
	"slices"

	"github.com/selectformer/selectformer/share"
)

// BitTensor is this party's XOR share of a tensor of bits, packed 64 per
// word: bit i of Words[j] is element 64j+i (row-major over Shape). The secret
// bits are the XOR of the two parties' words. Bits past the last element
// carry no meaning (they may be random) and every operation ignores them.
type BitTensor struct {
	// Shape holds the size of each dimension of the bit tensor.
	Shape []int
	// Words holds ⌈n/64⌉ words of packed XOR shares, n the product of Shape.
	Words []uint64
}

// Len returns the number of bits (the product of Shape).
func (b *BitTensor) Len() int {
	n := 1
	for _, d := range b.Shape {
		n *= d
	}
	return n
}

// Clone returns a deep copy.
func (b *BitTensor) Clone() *BitTensor {
	return &BitTensor{Shape: slices.Clone(b.Shape), Words: slices.Clone(b.Words)}
}

// check reports an error unless Words has ⌈Len/64⌉ words.
func (b *BitTensor) check(op string) error {
	if b == nil {
		return fmt.Errorf("protocol: %s: nil bit tensor", op)
	}
	for _, d := range b.Shape {
		if d < 0 {
			return fmt.Errorf("protocol: %s: bit tensor shape %v has a negative dimension", op, b.Shape)
		}
	}
	if want := share.PackedWords(b.Len()); len(b.Words) != want {
		return fmt.Errorf("protocol: %s: bit tensor %v has %d words, want %d", op, b.Shape, len(b.Words), want)
	}
	return nil
}

// Bit returns this party's share of element i.
func (b *BitTensor) Bit(i int) uint64 { return b.Words[i>>6] >> (uint(i) & 63) & 1 }

// NotBits returns the complement of a shared bit tensor: party 0 flips its
// share, party 1 copies it. No communication.
func (s *Session) NotBits(b *BitTensor) (*BitTensor, error) {
	if err := b.check("not"); err != nil {
		return nil, err
	}
	out := b.Clone()
	if s.party == 0 {
		for i := range out.Words {
			out.Words[i] = ^out.Words[i]
		}
	}
	return out, nil
}

// XorBits returns the XOR of two shared bit tensors of the same shape. No
// communication.
func XorBits(a, b *BitTensor) (*BitTensor, error) {
	if err := a.check("xor"); err != nil {
		return nil, err
	}
	if err := b.check("xor"); err != nil {
		return nil, err
	}
	if !slices.Equal(a.Shape, b.Shape) {
		return nil, fmt.Errorf("protocol: xor bits: shapes %v and %v differ", a.Shape, b.Shape)
	}
	out := a.Clone()
	for i, w := range b.Words {
		out.Words[i] ^= w
	}
	return out, nil
}

// RevealBits opens a shared bit tensor to both parties: one round, each party
// sending its ⌈n/64⌉ packed words (8·⌈n/64⌉ bytes + one frame header).
func (s *Session) RevealBits(ctx context.Context, b *BitTensor) ([]bool, error) {
	if err := b.check("reveal bits"); err != nil {
		return nil, err
	}
	n := b.Len()
	if n == 0 {
		return []bool{}, nil
	}
	mine := slices.Clone(b.Words)
	share.MaskTail(mine, n)
	theirs := make([]uint64, len(b.Words))
	if err := s.Exchange(ctx, mine, theirs); err != nil {
		return nil, fmt.Errorf("protocol: reveal bits %v: %w", b.Shape, err)
	}
	out := make([]bool, n)
	for i := range out {
		out[i] = (b.Words[i>>6]^theirs[i>>6])>>(uint(i)&63)&1 == 1
	}
	return out, nil
}

// bitSlice returns the 64 bit planes of x: plane i (words [i·W, (i+1)·W),
// W = ⌈len(x)/64⌉) holds bit i of every element, element e at bit e mod 64
// of word e/64. Elements past len(x) are zero.
func bitSlice(x []uint64) []uint64 {
	w := share.PackedWords(len(x))
	planes := make([]uint64, 64*w)
	var blk [64]uint64
	for j := 0; j < w; j++ {
		lo := 64 * j
		hi := min(lo+64, len(x))
		copy(blk[:], x[lo:hi])
		clear(blk[hi-lo:])
		share.Transpose64(&blk)
		for i := 0; i < 64; i++ {
			planes[i*w+j] = blk[i]
		}
	}
	return planes
}

// The sign circuit.
//
// The secret x = x0 + x1 (mod 2^64) has msb(x) = a63 ⊕ b63 ⊕ c63 where a = x0
// is party 0's clear share, b = x1 party 1's, and c63 is the carry into bit 63
// of a + b, i.e. the "generate" of the 63 low positions. With g_i = a_i∧b_i and
// p_i = a_i⊕b_i, a group [lo..hi] generates G = G_hi ⊕ P_hi∧G_lo and
// propagates P = P_hi∧P_lo (the terms are exclusive, so XOR is OR).
//
// Round 1 (cross ANDs, one bit per party per AND): the 63 positions form 32
// leaves: leaf 0 = position 0 and leaf j = positions (2j−1, 2j) for
// j = 1..31. A 2-position leaf (hi, lo) expands into products of a bit known
// to party 0 with a bit known to party 1:
//
//	G = a_hi·b_hi ⊕ (a_hi·a_lo)·b_lo ⊕ a_lo·(b_hi·b_lo)
//	P = a_hi·a_lo ⊕ b_hi·b_lo ⊕ a_hi·b_lo ⊕ a_lo·b_hi
//
// (expand g_hi ⊕ p_hi·g_lo and p_hi·p_lo with p = a⊕b). Leaf 0 needs only
// G = a_0·b_0 (the lowest group's P is never used). That is 1 + 31·5 = 156
// cross ANDs, in one exchange, with CrossANDTriples: party 0 sends X⊕u,
// party 1 sends Y⊕v, and then X·Y = e·X ⊕ d·v ⊕ u·v is shared as
// (e·X ⊕ c0, d·v ⊕ c1).
//
// Rounds 2..6 (ordinary ANDs, two bits per party per AND): a binary tree over
// the 32 leaves. Combining node pairs (hi = 2i+1, lo = 2i) takes one AND for
// G (P_hi·G_lo) and one for P (P_hi·P_lo), except for the lowest node whose P
// is never needed: 31, 15, 7, 3, 1 ANDs at the five levels, 57 in all. Each
// level is one exchange with AND triples (a Beaver AND: open x⊕a, y⊕b).
//
// Cost for n elements, W = ⌈n/64⌉ (64 comparisons per word): 6 rounds and
// 6 messages per party, of 156W, 62W, 30W, 14W, 6W and 2W words: 270W words,
// i.e. 270 bits = 33.75 bytes per comparison per party plus the transport's
// frame headers (SignCircuitWords and MSBCost, cost.go).
//
// The 32-bit circuit. The same circuit on the low 32 bits of the shares
// (width 32) computes bit 31 of (x0 + x1) mod 2^32 = x mod 2^32: the 31 low
// positions form 16 leaves (leaf 0 = position 0, leaf j = positions
// (2j−1, 2j) for j = 1..15), 1 + 15·5 = 76 cross ANDs, then a tree of 4
// levels with 15, 7, 3 and 1 ANDs: 5 rounds and 128W words (76W, 30W, 14W,
// 6W, 2W). Bit 31 of x mod 2^32 is msb(x) whenever x, read as an int64,
// satisfies −2^31 ≤ x < 2^31 (x mod 2^32 read as an int32 is then x itself).

// msbBits runs the sign circuit on this party's share x and returns its XOR
// share of msb(x0 + x1), packed (⌈len(x)/64⌉ words).
func (s *Session) msbBits(ctx context.Context, x []uint64) ([]uint64, error) {
	return s.msbBitsWith(ctx, x, 64, nil, nil)
}

// msbBitsWith is msbBits on an even width of 2..64 bits (width w: the share
// of bit w−1 of (x0 + x1) mod 2^w, see "The 32-bit circuit" above, whose
// layout holds for every even width: leaves w/2, leaf 0 position 0, leaf j
// positions (2j−1, 2j)) whose first
// exchange (the leaves' cross ANDs) also carries another protocol's
// independent opening: the message sent is riderSend followed by the masked
// leaf words, and the peer's message is received likewise, its first
// len(riderRecv) words into riderRecv. The riders must have the same length.
// On empty x nothing is exchanged (the riders neither; the caller must not
// need them then).
func (s *Session) msbBitsWith(ctx context.Context, x []uint64, width int, riderSend, riderRecv []uint64) ([]uint64, error) {
	if !signWidthOK(width) {
		return nil, fmt.Errorf("protocol: sign circuit on %d bits: need an even width of 2..64", width)
	}
	n := len(x)
	w := share.PackedWords(n)
	if n == 0 {
		return []uint64{}, nil
	}
	planes := bitSlice(x)
	sid := s.StreamID()
	shape := signCircuit(width)

	// Round 1: the cross ANDs of the leaves (156 for 64 bits, 76 for 32).
	op, local := leafOperands(s.party, planes, w, shape)
	z, err := s.crossAND(ctx, sid, op, riderSend, riderRecv)
	if err != nil {
		return nil, fmt.Errorf("protocol: sign circuit, leaves: %w", err)
	}
	gs, ps := leafCarries(z, local, w, shape.leaves)

	// Rounds 2..: the carry tree, one exchange per level.
	for i, ands := range shape.ands {
		xs, ys := carryLevelOperands(gs, ps, w, ands)
		zz, err := s.andBits(ctx, sid, xs, ys)
		if err != nil {
			return nil, fmt.Errorf("protocol: sign circuit, level %d: %w", i+2, err)
		}
		gs, ps = combineCarryLevel(zz, gs, ps, w)
	}
	return msbFromCarry(bitPlane(planes, w, width-1), gs[0]), nil
}

// signShape is the sign circuit's layout on width bits, per word (64
// elements) of input: the one description that both the circuit
// (msbBitsWith sizes its messages from it) and the cost table
// (signWords, cost.go) read.
type signShape struct {
	// leaves is width/2: leaf 0 is position 0, leaf j positions (2j−1, 2j).
	leaves int
	// cross is the cross ANDs of round 1: 1 for leaf 0, 5 for each other leaf.
	cross int
	// ands holds the ANDs of each level of the carry tree: per node pair one
	// for G and, except for the lowest pair (whose P is never used), one for
	// P; an odd last node passes up.
	ands []int
}

// signWidthOK reports whether the sign circuit runs on width bits: an even
// width of 2..64.
func signWidthOK(width int) bool { return width >= 2 && width <= 64 && width%2 == 0 }

// signCircuit returns the layout of the sign circuit on width bits (an even
// width of 2..64; the caller checks).
func signCircuit(width int) signShape {
	sh := signShape{leaves: width / 2}
	sh.cross = 1 + 5*(sh.leaves-1)
	for nodes := sh.leaves; nodes > 1; nodes = (nodes + 1) / 2 {
		sh.ands = append(sh.ands, 2*(nodes/2)-1)
	}
	return sh
}

// words returns the words each party sends at each exchange, per word of
// input: the cross ANDs (one word each), then two words per AND of each
// tree level (a Beaver AND opens both operands).
func (sh signShape) words() []int {
	out := []int{sh.cross}
	for _, a := range sh.ands {
		out = append(out, 2*a)
	}
	return out
}

// bitPlane is plane i of the bit-sliced planes (bitSlice) of w words each:
// bit i of every element, packed.
func bitPlane(planes []uint64, w, i int) []uint64 { return planes[i*w : (i+1)*w] }

// leafOperands lays out party's side of the leaves' cross ANDs (round 1 of
// the sign circuit of layout sh) on bit-sliced planes of w words: op holds,
// per word, the sh.cross = 1 + 5·(leaves−1) bits this party holds in the
// clear, in the order the
// cross AND pairs them with the peer's (leaf 0: bit 0; leaf j: for party 0
// a_hi, a_hi·a_lo, a_lo, a_hi, a_lo and for party 1 b_hi, b_lo, b_hi·b_lo,
// b_lo, b_hi), and local holds the leaves' local products a_hi·a_lo (party
// 0) or b_hi·b_lo (party 1), (leaves−1)·w words.
func leafOperands(party int, planes []uint64, w int, sh signShape) (op, local []uint64) {
	leaves := sh.leaves
	op = make([]uint64, sh.cross*w)
	local = make([]uint64, (leaves-1)*w) // a_hi·a_lo (party 0) or b_hi·b_lo (party 1)
	copy(op[:w], bitPlane(planes, w, 0))
	for j := 1; j < leaves; j++ {
		hi, lo := bitPlane(planes, w, 2*j), bitPlane(planes, w, 2*j-1)
		both := local[(j-1)*w : j*w]
		for k := range both {
			both[k] = hi[k] & lo[k]
		}
		base := (1 + 5*(j-1)) * w
		dst := func(t int) []uint64 { return op[base+t*w : base+(t+1)*w] }
		if party == 0 {
			copy(dst(0), hi)
			copy(dst(1), both)
			copy(dst(2), lo)
			copy(dst(3), hi)
			copy(dst(4), lo)
		} else {
			copy(dst(0), hi)
			copy(dst(1), lo)
			copy(dst(2), both)
			copy(dst(3), lo)
			copy(dst(4), hi)
		}
	}
	return op, local
}

// leafCarries assembles, from this party's shares z of the leaves' cross
// ANDs (laid out as leafOperands lays out op) and its local products, its XOR
// shares of each leaf's generate gs[j] and propagate ps[j] (ps[0] is nil: the
// lowest group's propagate is never used). The slices alias z, which is
// overwritten.
func leafCarries(z, local []uint64, w, leaves int) (gs, ps [][]uint64) {
	gs = make([][]uint64, leaves)
	ps = make([][]uint64, leaves)
	gs[0] = z[:w]
	for j := 1; j < leaves; j++ {
		base := (1 + 5*(j-1)) * w
		zt := func(t int) []uint64 { return z[base+t*w : base+(t+1)*w] }
		g, p := zt(0), zt(3)
		z1, z2, z4 := zt(1), zt(2), zt(4)
		both := local[(j-1)*w : j*w]
		for k := range g {
			g[k] ^= z1[k] ^ z2[k]
			p[k] ^= z4[k] ^ both[k]
		}
		gs[j], ps[j] = g, p
	}
	return gs, ps
}

// carryLevelOperands lays out the ANDs of one level of the carry tree over
// the nodes' generate and propagate shares gs, ps (w words each): for each
// pair (hi = 2i+1, lo = 2i), P_hi·G_lo and, unless ps[lo] is nil, P_hi·P_lo.
// An odd last node takes no AND. ands is the level's AND count from the
// circuit's layout (signShape.ands), which sizes xs and ys; it panics if the
// nodes call for another count (a broken invariant of the circuit).
func carryLevelOperands(gs, ps [][]uint64, w, ands int) (xs, ys []uint64) {
	m := len(gs) / 2
	need := 0
	for i := 0; i < m; i++ {
		need++
		if ps[2*i] != nil {
			need++
		}
	}
	if need != ands {
		panic(fmt.Sprintf("protocol: sign circuit: %d nodes need %d ANDs, the layout has %d", len(gs), need, ands))
	}
	xs = make([]uint64, ands*w)
	ys = make([]uint64, ands*w)
	t := 0
	for i := 0; i < m; i++ {
		copy(xs[t*w:], ps[2*i+1])
		copy(ys[t*w:], gs[2*i])
		t++
		if ps[2*i] != nil {
			copy(xs[t*w:], ps[2*i+1])
			copy(ys[t*w:], ps[2*i])
			t++
		}
	}
	return xs, ys
}

// combineCarryLevel makes the next level's nodes from this level's gs, ps
// and the shares zz of the ANDs carryLevelOperands laid out: G = G_hi ⊕
// P_hi·G_lo and P = P_hi·P_lo (nil where ps[lo] is nil); an odd last node
// passes up unchanged. The results alias zz, which is overwritten.
func combineCarryLevel(zz []uint64, gs, ps [][]uint64, w int) (ngs, nps [][]uint64) {
	m := len(gs) / 2
	ngs = make([][]uint64, 0, (len(gs)+1)/2)
	nps = make([][]uint64, 0, (len(gs)+1)/2)
	t := 0
	for i := 0; i < m; i++ {
		g := zz[t*w : (t+1)*w]
		t++
		ghi := gs[2*i+1]
		for k := range g {
			g[k] ^= ghi[k]
		}
		var p []uint64
		if ps[2*i] != nil {
			p = zz[t*w : (t+1)*w]
			t++
		}
		ngs = append(ngs, g)
		nps = append(nps, p)
	}
	if len(gs)%2 == 1 {
		ngs = append(ngs, gs[len(gs)-1])
		nps = append(nps, ps[len(ps)-1])
	}
	return ngs, nps
}

// msbFromCarry is this party's share of the top bit of the sum: its clear
// top bit plane XOR its share of the carry into the top bit.
func msbFromCarry(top, carry []uint64) []uint64 {
	out := make([]uint64, len(top))
	for k := range out {
		out[k] = top[k] ^ carry[k]
	}
	return out
}

// crossAND multiplies, bitwise, the words op held in the clear by party 0
// with the words op held in the clear by party 1, returning this party's XOR
// share of the product. One exchange of len(op) words each way. op is
// overwritten (with the masked words sent). The exchange also carries the
// rider words (nil for none, see msbBitsWith): riderSend goes before the
// masked words in the message sent, and the peer's rider words land in
// riderRecv.
func (s *Session) crossAND(ctx context.Context, sid uint32, op, riderSend, riderRecv []uint64) ([]uint64, error) {
	k := len(op)
	e := len(riderSend)
	if len(riderRecv) != e {
		return nil, fmt.Errorf("cross AND: rider of %d words sent, %d received", e, len(riderRecv))
	}
	tr, err := s.prov.CrossANDTriples(ctx, sid, k)
	if err != nil {
		return nil, fmt.Errorf("cross AND triples: %w", err)
	}
	mask := tr.A
	if s.party == 1 {
		mask = tr.B
	}
	if len(mask) != k || len(tr.C) != k {
		return nil, fmt.Errorf("cross AND triples: provider returned %d/%d words, want %d", len(mask), len(tr.C), k)
	}
	send := op
	for i := range send {
		send[i] ^= mask[i]
	}
	var z []uint64 // receives the peer's masked words, then the share
	if e == 0 {
		z = make([]uint64, k)
		if err := s.Exchange(ctx, send, z); err != nil {
			return nil, fmt.Errorf("cross AND exchange: %w", err)
		}
	} else {
		msg := share.GetWords(e + k) // scratch: overwritten before use
		defer share.PutWords(msg)
		copy(msg, riderSend)
		copy(msg[e:], send)
		in := make([]uint64, e+k)
		if err := s.Exchange(ctx, msg, in); err != nil {
			return nil, fmt.Errorf("cross AND exchange: %w", err)
		}
		copy(riderRecv, in[:e])
		z = in[e:]
	}
	if s.party == 0 {
		// Party 0 holds X = send⊕u; it received e = Y⊕v: share e·X ⊕ c0.
		for i, e := range z {
			z[i] = e&(send[i]^mask[i]) ^ tr.C[i]
		}
	} else {
		// Party 1 holds v; it received d = X⊕u: share d·v ⊕ c1.
		for i, d := range z {
			z[i] = d&mask[i] ^ tr.C[i]
		}
	}
	return z, nil
}

// andBits multiplies two XOR-shared bit vectors (bitwise AND of the secrets)
// with AND triples: one exchange of 2·len(x) words each way.
func (s *Session) andBits(ctx context.Context, sid uint32, x, y []uint64) ([]uint64, error) {
	k := len(x)
	if len(y) != k {
		return nil, fmt.Errorf("AND of %d and %d words", k, len(y))
	}
	tr, err := s.prov.ANDTriples(ctx, sid, k)
	if err != nil {
		return nil, fmt.Errorf("AND triples: %w", err)
	}
	if len(tr.A) != k || len(tr.B) != k || len(tr.C) != k {
		return nil, fmt.Errorf("AND triples: provider returned %d/%d/%d words, want %d", len(tr.A), len(tr.B), len(tr.C), k)
	}
	send := share.GetWords(2 * k) // scratch: overwritten before use
	defer share.PutWords(send)
	for i := 0; i < k; i++ {
		send[i] = x[i] ^ tr.A[i]
		send[k+i] = y[i] ^ tr.B[i]
	}
	recv := make([]uint64, 2*k)
	if err := s.Exchange(ctx, send, recv); err != nil {
		return nil, fmt.Errorf("AND exchange: %w", err)
	}
	z := recv[:k:k] // the share overwrites the received words as they are used
	for i := range z {
		d := send[i] ^ recv[i]
		e := send[k+i] ^ recv[k+i]
		v := tr.C[i] ^ d&tr.B[i] ^ e&tr.A[i]
		if s.party == 0 {
			v ^= d & e
		}
		z[i] = v
	}
	return z, nil
}
