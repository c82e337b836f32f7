package ot

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"sync"
	"testing"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/he"
	"github.com/selectformer/selectformer/transport"
)

// tamper is an altering data owner behind party 1's streams: out changes
// the message of outputs it sends (the one of outWords words), in the
// upload it receives (of inWords words), both at most once.
type tamper struct {
	mu                sync.Mutex
	outWords, inWords int
	out, in           func(w []uint64)
	done              bool
}

// tamperConn is party 1's end of a stream, altered as its tamper says.
type tamperConn struct {
	Conn
	*tamper
}

func (c tamperConn) SendWords(ctx context.Context, w []uint64) error {
	c.mu.Lock()
	if c.out != nil && !c.done && len(w) == c.outWords {
		w = append([]uint64(nil), w...)
		c.out(w)
		c.done = true
	}
	c.mu.Unlock()
	return c.Conn.SendWords(ctx, w)
}

func (c tamperConn) RecvWords(ctx context.Context, dst []uint64) error {
	err := c.Conn.RecvWords(ctx, dst)
	c.mu.Lock()
	if err == nil && c.in != nil && !c.done && len(dst) == c.inWords {
		c.in(dst)
		c.done = true
	}
	c.mu.Unlock()
	return err
}

// tamperPair returns a bound pair of Lattice providers with options o
// whose party 1 alters its streams' traffic as tc says.
func tamperPair(t *testing.T, o ProviderOptions, tc *tamper) (p0, p1 *Provider) {
	t.Helper()
	c0, c1 := transport.Pipe(transport.Options{})
	t.Cleanup(func() { c0.Close(); c1.Close() })
	var err error
	if p0, err = newProvider(func(id uint32) Conn { return c0.Stream(id) }, 0, own(t, o)); err != nil {
		t.Fatal(err)
	}
	open1 := func(id uint32) Conn { return tamperConn{Conn: c1.Stream(id), tamper: tc} }
	if p1, err = newProvider(open1, 1, own(t, o)); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	both(t, func() (struct{}, error) { return struct{}{}, p0.BindSession(ctx, testSID) },
		func() (struct{}, error) { return struct{}{}, p1.BindSession(ctx, testSID) })
	return p0, p1
}

// outputField returns the bit offset, in the message of outputs of item
// it, of value idx of output o's block bi (c1 or c0), and its width.
func outputField(it *heItem, sc *he.Scheme, o, bi int, c1 bool, idx int) (off, width int) {
	p := sc.Params()
	off = 64 // the message's tag word
	for i := range o {
		off += 64 * wordsFor(it.out[i])
	}
	off += 8 * 18 // the output's header
	po := it.plan.Outputs[o]
	l := po.Layout
	cb := (po.Width + l.NW - 1) / l.NW
	for b := 0; ; b++ {
		ib, jb := b/cb, b%cb
		rows, cols := min(l.MW, po.Rows-ib*l.MW), min(l.NW, po.Width-jb*l.NW)
		if b == bi {
			if c1 {
				return off + rows*cols*p.LogQ0 + idx*p.LogQ1, p.LogQ1
			}
			return off + idx*p.LogQ0, p.LogQ0
		}
		off += rows*cols*p.LogQ0 + sc.N()*p.LogQ1
	}
}

// addBits adds v·2^shift to the width-bit field at bit off of the
// little-endian message w, modulo 2^width.
func addBits(w []uint64, off, width int, v int64, shift int) {
	b := wordsToBytes(w)
	x := new(big.Int)
	for i := width - 1; i >= 0; i-- {
		bit := off + i
		x.Lsh(x, 1)
		x.Or(x, big.NewInt(int64(b[bit/8]>>(bit%8)&1)))
	}
	x.Add(x, new(big.Int).Lsh(big.NewInt(v), uint(shift)))
	x.Mod(x, new(big.Int).Lsh(big.NewInt(1), uint(width)))
	for i := range width {
		bit := off + i
		b[bit/8] = b[bit/8]&^(1<<(bit%8)) | byte(x.Bit(i))<<(bit%8)
	}
	copy(w, bytesToWords(b))
}

// TestHECheckCatchesTampering: a data owner that alters what it sends in
// a -provider he item — δ·2^(LogQ1−64)·X^t added to an output's c1 (the
// attack that read the model owner's key on 69b02c1: δ = 1, and δ = 2^63,
// which survives one random check column with probability 1/2), a known
// constant added to a c0, only the check columns or the check output
// altered, its commitment changed, or the encrypted weights it loaded
// altered — makes the model owner's Material fail with
// beaver.ErrCorrelationCheck and return nothing: no share derived from
// the outputs. The model owner's HE key is then discarded: its next item
// and any bind fail the same way. A change below the decryption's rounding
// (c1 + 1 at LogQ1 scale) passes, with the exact honest correlation. The
// merged plan (4×8·8×12), the separate, split one (MaxInner 16,
// 3×10·10×12: product, check, check) and the compressed one (300×4·4×3:
// the check on ρ·C0; here the product output is altered after party 1
// derived ρ from it, beaver/he's TestCheckCatchesTampering alters it
// before).
func TestHECheckCatchesTampering(t *testing.T) {
	small := he.DefaultParams()
	small.MaxInner = 16
	merged := beaver.Request{Kind: beaver.KindWeightTriple, WeightID: 4, M: 4, K: 8, N: 12}
	split := beaver.Request{Kind: beaver.KindWeightTriple, WeightID: 5, M: 3, K: 10, N: 12}
	vector := beaver.Request{Kind: beaver.KindWeightVectorTriple, WeightID: 6, M: 4, N: 5}
	tall := beaver.Request{Kind: beaver.KindWeightTriple, WeightID: 7, M: 300, K: 4, N: 3}
	logQ1 := he.DefaultParams().LogQ1
	type field struct {
		o, block int
		c1       bool
		idx      int
		delta    int64
		shift    int
	}
	cases := []struct {
		name   string
		params *he.Params
		r      beaver.Request
		out    *field // alter the outputs message here
		commit bool   // flip a bit of the commitment
		upload bool   // alter the first encrypted matrix party 1 receives
		pass   bool
	}{
		{name: "c1+2^(LogQ1-64)·X^t", r: merged, out: &field{0, 0, true, 5, 1, logQ1 - 64}},
		{name: "c1+2^63·2^(LogQ1-64)·X^t", r: merged, out: &field{0, 0, true, 5, 1, logQ1 - 1}},
		{name: "vector/c1+2^63·2^(LogQ1-64)·X^t", r: vector, out: &field{0, 0, true, 0, 1, logQ1 - 1}},
		{name: "c0+1 (known constant)", r: merged, out: &field{0, 0, false, 1, 1, 4}},
		{name: "check column only", r: merged, out: &field{0, 0, false, 12, 1, 67}}, // row 0, column n
		{name: "commitment", r: merged, commit: true},
		{name: "loaded weights", r: merged, upload: true},
		{name: "split/c1+2^63·2^(LogQ1-64)·X^t", params: &small, r: split, out: &field{0, 0, true, 3, 1, logQ1 - 1}},
		{name: "split/check output only", params: &small, r: split, out: &field{2, 0, true, 3, 1, logQ1 - 1}},
		{name: "compressed/c1+2^63·2^(LogQ1-64)·X^t", r: tall, out: &field{0, 0, true, 5, 1, logQ1 - 1}},
		{name: "compressed/c0+2^63 in one row", r: tall, out: &field{0, 0, false, 7, 1, 67}},
		{name: "compressed/check output only", r: tall, out: &field{1, 0, true, 5, 1, logQ1 - 1}},
		{name: "c1+1 at LogQ1 scale (below rounding)", r: merged, out: &field{0, 0, true, 5, 1, 0}, pass: true},
	}
	// Under -short (the race run, 1.3 s a case there) one case of each
	// message altered and of each plan, and the one that must pass; the
	// plain suite runs them all.
	inShort := map[string]bool{"c1+2^63·2^(LogQ1-64)·X^t": true, "commitment": true, "loaded weights": true,
		"split/check output only": true, "compressed/c0+2^63 in one row": true, "c1+1 at LogQ1 scale (below rounding)": true}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && !inShort[c.name] {
				t.Skip("the plain suite runs every case")
			}
			o := withLattice(t, LatticeOptions{Params: c.params})
			tc := &tamper{}
			p0, p1 := tamperPair(t, o, tc)
			it, err := p0.lat().item(c.r)
			if err != nil {
				t.Fatal(err)
			}
			if c.r == split && len(it.plan.Outputs) != 3 || c.r == merged && len(it.plan.Outputs) != 1 || c.r == tall && !it.plan.Compressed {
				t.Fatalf("plan %+v: not the plan the case is for", it.plan.Outputs)
			}
			for _, b := range it.out {
				tc.outWords += wordsFor(b)
			}
			tc.outWords += 1 + heCommitWords // the tag, the outputs, the commitment
			switch {
			case c.out != nil:
				f := c.out
				tc.out = func(w []uint64) {
					off, width := outputField(it, p0.lat().sc, f.o, f.block, f.c1, f.idx)
					addBits(w, off, width, f.delta, f.shift)
				}
			case c.commit:
				tc.out = func(w []uint64) { w[len(w)-1] ^= 1 }
			case c.upload:
				tm := it.terms[0]
				tc.inWords = wordsFor(p0.lat().sc.WeightSizes(tm.rows, tm.cols, tm.t.Off, tm.l).Bytes)
				// The first residue of the first ciphertext's c0 (54 bits,
				// below its modulus but for a 2^−54 chance).
				tc.in = func(w []uint64) { addBits(w, 8*54, 1, 1, 0) }
			}
			ctx := testCtx(t)
			errs := make(chan error, 1)
			var m1 beaver.Material
			go func() {
				var err error
				m1, err = p1.Material(ctx, c.r)
				errs <- err
			}()
			m0, err := p0.Material(ctx, c.r)
			if err1 := <-errs; err1 != nil {
				t.Fatalf("the data owner's side failed: %v", err1)
			}
			if !tc.done {
				t.Fatal("nothing was altered")
			}
			if c.pass {
				if err != nil {
					t.Fatalf("a change below the rounding failed the check: %v", err)
				}
				checkMaterial(t, c.r, m0, m1, func(id uint64, k, n int) []uint64 {
					w, err := p0.WeightMask(ctx, id, k, n)
					if err != nil {
						t.Fatal(err)
					}
					return w
				})
				return
			}
			if !errors.Is(err, beaver.ErrCorrelationCheck) || m0.Parts != nil {
				t.Fatalf("model owner: %v with %d parts, want beaver.ErrCorrelationCheck and nothing", err, len(m0.Parts))
			}
			if st := p0.lat().Stats(); st.Items != 0 {
				t.Errorf("model owner counts %d items made", st.Items)
			}
			// The key is gone: another item (on another stream) and a bind fail.
			r2 := c.r
			r2.Stream = 7
			if _, err := p0.Material(ctx, r2); !errors.Is(err, beaver.ErrCorrelationCheck) {
				t.Errorf("next item after a failed check: %v", err)
			}
			if err := p0.BindSession(ctx, testSID); !errors.Is(err, beaver.ErrCorrelationCheck) {
				t.Errorf("bind after a failed check: %v", err)
			}
			p0.lat().mu.Lock()
			sk := p0.lat().sk
			p0.lat().mu.Unlock()
			if sk != nil {
				t.Error("the secret key is kept after a failed check")
			}
		})
	}
}

// TestHEProviderRefusesChosenSeeds: the data owner accepts the model
// owner's public key and encrypted matrices only with the public seeds
// derived from the session id, so the model owner cannot choose the
// uniform halves (p1, the weights' c1) that the data owner's
// re-randomisation and products multiply: a key or an upload with another
// seed is refused, the derived one accepted.
func TestHEProviderRefusesChosenSeeds(t *testing.T) {
	_, p1, _ := heProviders(t)
	sc := p1.lat().sc
	ctx := testCtx(t)
	sk, _, err := sc.KeyGen(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		seed [he.SeedSize]byte
		ok   bool
	}{{"derived", seedFor(testSID, nil), true}, {"chosen", [he.SeedSize]byte{1}, false}} {
		t.Run("public key/"+c.name, func(t *testing.T) {
			_, pk, err := sc.KeyGenWithSeed(c.seed, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := pk.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			h, err := NewLattice(LatticeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			err = h.keys(ctx, &scriptConn{data: wordsToBytes(bytesToWordsPad(b)), limit: 1}, 1, testSID)
			if (err == nil) != c.ok || err != nil && !strings.Contains(err.Error(), "seed") {
				t.Fatalf("public key with the %s seed: %v", c.name, err)
			}
		})
	}
	r := beaver.Request{Kind: beaver.KindWeightTriple, WeightID: 9, M: 2, K: 2, N: 3}
	it, err := p1.lat().item(r)
	if err != nil {
		t.Fatal(err)
	}
	tm := it.terms[0]
	W := make([]uint64, tm.rows*tm.cols)
	for _, c := range []struct {
		name string
		seed [he.SeedSize]byte
		ok   bool
	}{{"derived", seedFor(testSID, &tm.key), true}, {"chosen", [he.SeedSize]byte{2}, false}, {"another key's", seedFor(testSID, &it.terms[1].key), false}} {
		t.Run("weights/"+c.name, func(t *testing.T) {
			ew, err := sc.EncryptWeightsAt(sk, W, tm.rows, tm.cols, tm.t.Off, tm.l, c.seed, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := ew.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			c1 := &scriptConn{data: wordsToBytes(bytesToWordsPad(b)), limit: 1}
			if _, err := p1.lat().load(ctx, c1, testSID, tm); (err == nil) != c.ok || err != nil && !strings.Contains(err.Error(), "seed") {
				t.Fatalf("weights with the %s seed: %v", c.name, err)
			}
		})
	}
}
