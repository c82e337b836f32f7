package he

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"testing/iotest"
)

// small messages of every kind, for seed corpora.
func smallMessages(t testing.TB) (pk, ew, out []byte) {
	s := defaultScheme
	rnd := newDetRand(77)
	sk, p, err := s.KeyGen(rnd)
	if err != nil {
		t.Fatal(err)
	}
	l := Layout{MW: 1, NW: 1}
	w, err := s.EncryptWeights(sk, []uint64{1 << 63}, 1, 1, l, rnd)
	if err != nil {
		t.Fatal(err)
	}
	lw, err := s.LoadWeights(p, w)
	if err != nil {
		t.Fatal(err)
	}
	o, err := s.MulMasked(lw, []uint64{^uint64(0)}, 1, []uint64{5}, rnd)
	if err != nil {
		t.Fatal(err)
	}
	if pk, err = p.AppendBinary(nil); err != nil {
		t.Fatal(err)
	}
	if ew, err = w.AppendBinary(nil); err != nil {
		t.Fatal(err)
	}
	if out, err = o.AppendBinary(nil); err != nil {
		t.Fatal(err)
	}
	return pk, ew, out
}

// header returns a message header claiming d0×d1 with layout l.
func header(tag byte, d0, d1, mw, nw uint32) []byte {
	b := []byte{tag, wireVersion}
	for _, v := range []uint32{d0, d1, mw, nw} {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}

// malformed returns variants of a valid message: truncated, extended, a
// padding or residue bit flipped, a wrong tag, oversized headers.
func malformed(valid []byte, tag byte) [][]byte {
	flip := func(i int, m byte) []byte { b := bytes.Clone(valid); b[i] ^= m; return b }
	ones := bytes.Clone(valid) // the last residue ≥ its modulus, or padding set
	for i := len(ones) - 7; i < len(ones); i++ {
		ones[i] = 0xff
	}
	return [][]byte{
		nil,
		valid[:1],
		valid[:len(valid)-1],
		append(bytes.Clone(valid), 0),
		ones,
		flip(0, 0xff),
		flip(1, 0x01),
		header(tag, 1<<24, 1<<24, 1, 1),
		header(tag, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff),
		header(tag, 1, 1, 64, 128),
		append(header(tag, 64, 64, 3, 4), make([]byte, 100)...),
	}
}

func FuzzDecodeOutput(f *testing.F) {
	_, _, out := smallMessages(f)
	f.Add(out)
	for _, b := range malformed(out, tagOutput) {
		f.Add(b)
	}
	s := defaultScheme
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := s.DecodeOutput(data, 64, 64)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if o.M > 64 || o.N > 64 {
			t.Fatalf("decoded %d×%d beyond the bounds", o.M, o.N)
		}
		b, err := o.AppendBinary(nil)
		if err != nil || !bytes.Equal(b, data) {
			t.Fatalf("re-encoding differs (%v)", err)
		}
	})
}

// offsetWeights returns an encrypted 1×2 matrix placed at the columns
// [1, 3) of a product with NW = 2 (two ciphertexts, the check columns'
// placement), and variants of its offset field: beyond 2^24 columns, and
// one that changes the ciphertext count its length implies.
func offsetWeights(t testing.TB) (valid []byte, bad [][]byte) {
	s := defaultScheme
	sk, _, err := s.KeyGen(newDetRand(78))
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.EncryptWeightsAt(sk, []uint64{1 << 63, 7}, 1, 2, 1, Layout{MW: 1, NW: 2}, [SeedSize]byte{9}, newDetRand(79))
	if err != nil {
		t.Fatal(err)
	}
	if valid, err = w.AppendBinary(nil); err != nil {
		t.Fatal(err)
	}
	for _, off := range []uint32{1 << 24, 0xffffffff, 2} {
		b := bytes.Clone(valid)
		binary.LittleEndian.PutUint32(b[18:], off)
		bad = append(bad, b)
	}
	// KW (the NW field's high half) not a power of two, or too large for
	// the ring.
	for _, kw := range []uint32{3, 1 << 13} {
		b := bytes.Clone(valid)
		binary.LittleEndian.PutUint32(b[14:], 2|kw<<16)
		bad = append(bad, b)
	}
	return valid, bad
}

// kwWeights returns an encrypted 5×3 matrix packed 4 rows to a ciphertext
// (KW = 4: two ciphertexts, the second with one row).
func kwWeights(t testing.TB) []byte {
	s := defaultScheme
	sk, _, err := s.KeyGen(newDetRand(80))
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.EncryptWeights(sk, fill(nil, 15, "edges"), 5, 3, Layout{MW: 2, NW: 4, KW: 4}, newDetRand(81))
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzDecodeEncryptedWeights(f *testing.F) {
	_, ew, _ := smallMessages(f)
	f.Add(ew)
	for _, b := range malformed(ew, tagWeights) {
		f.Add(b)
	}
	off, bad := offsetWeights(f)
	f.Add(off)
	f.Add(kwWeights(f))
	for _, b := range bad {
		f.Add(b)
	}
	s := defaultScheme
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := s.DecodeEncryptedWeights(data, 4, 4)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if w.K > 4 || w.N > 4 {
			t.Fatalf("decoded %d×%d beyond the bounds", w.K, w.N)
		}
		b, err := w.AppendBinary(nil)
		if err != nil || !bytes.Equal(b, data) {
			t.Fatalf("re-encoding differs (%v)", err)
		}
	})
}

func FuzzDecodePublicKey(f *testing.F) {
	pk, _, _ := smallMessages(f)
	f.Add(pk)
	for _, b := range malformed(pk, tagPublicKey) {
		f.Add(b)
	}
	s := defaultScheme
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := s.DecodePublicKey(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		b, err := p.AppendBinary(nil)
		if err != nil || !bytes.Equal(b, data) {
			t.Fatalf("re-encoding differs (%v)", err)
		}
	})
}

// TestDecodeBounds: a header that claims more than the caller's bounds, or
// a size its bytes do not have, is refused before anything is allocated
// for it; every malformed variant is an ErrMalformed.
func TestDecodeBounds(t *testing.T) {
	s := defaultScheme
	pk, ew, out := smallMessages(t)
	for i, b := range malformed(out, tagOutput) {
		if _, err := s.DecodeOutput(b, 64, 64); !errors.Is(err, ErrMalformed) {
			t.Errorf("output variant %d: %v", i, err)
		}
	}
	off, bad := offsetWeights(t)
	for i, b := range append(malformed(ew, tagWeights), bad...) {
		if _, err := s.DecodeEncryptedWeights(b, 4, 4); !errors.Is(err, ErrMalformed) {
			t.Errorf("weights variant %d: %v", i, err)
		}
	}
	if w, err := s.DecodeEncryptedWeights(off, 4, 4); err != nil || w.Off != 1 || len(w.C0) != 2 {
		t.Errorf("weights at column 1: %v", err)
	}
	if w, err := s.DecodeEncryptedWeights(kwWeights(t), 8, 4); err != nil || w.Layout.KW != 4 || len(w.C0) != 2 {
		t.Errorf("weights with KW = 4: %v", err)
	}
	for i, b := range malformed(pk, tagPublicKey) {
		if _, err := s.DecodePublicKey(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("public key variant %d: %v", i, err)
		}
	}
	// The caller's bound binds: a valid 1×1 message refused under 0.
	if _, err := s.DecodeOutput(out, 0, 64); !errors.Is(err, ErrMalformed) {
		t.Errorf("bound 0 rows: %v", err)
	}
	// A header claiming the largest sizes, with few bytes, allocates only
	// the error.
	big := header(tagOutput, 1<<24, 1<<24, 1, 1)
	allocs := testing.AllocsPerRun(10, func() { _, _ = s.DecodeOutput(big, 1<<30, 1<<30) })
	bigW := header(tagWeights, 4096, 1<<24, 1, 1)
	allocs += testing.AllocsPerRun(10, func() { _, _ = s.DecodeEncryptedWeights(bigW, 1<<30, 1<<30) })
	if allocs > 20 {
		t.Errorf("refusing oversized headers made %.0f allocations", allocs)
	}
}

// TestDecodeEncryptedWeightsFrom: the streaming decoder reads a message
// delivered a byte at a time to the same weights as DecodeEncryptedWeights,
// reads exactly the message, and fails on a short stream or a size other
// than the header's.
func TestDecodeEncryptedWeightsFrom(t *testing.T) {
	s := defaultScheme
	msg := kwWeights(t)
	want, err := s.DecodeEncryptedWeights(msg, 8, 4)
	if err != nil {
		t.Fatal(err)
	}
	r := bytes.NewReader(append(append([]byte(nil), msg...), 0xee))
	got, err := s.DecodeEncryptedWeightsFrom(iotest.OneByteReader(r), int64(len(msg)), 8, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got.K != want.K || got.N != want.N || got.Off != want.Off || got.Layout != want.Layout || got.Seed != want.Seed || len(got.C0) != len(want.C0) {
		t.Fatalf("streamed %+v, want %+v", got, want)
	}
	for i := range got.C0 {
		if !got.C0[i].Equal(&want.C0[i]) {
			t.Fatalf("ciphertext %d differs", i)
		}
	}
	if r.Len() != 1 {
		t.Fatalf("%d bytes left after the message, want the 1 that follows it", r.Len())
	}
	for _, c := range []struct {
		name string
		data []byte
		size int64
	}{
		{"short stream", msg[:len(msg)-1], int64(len(msg))},
		{"size one short", msg, int64(len(msg) - 1)},
		{"size below the header", msg, 10},
	} {
		if _, err := s.DecodeEncryptedWeightsFrom(bytes.NewReader(c.data), c.size, 8, 4); err == nil {
			t.Errorf("%s: decoded", c.name)
		}
	}
}
