package purchase

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzVerify reads arbitrary bundles: Verify never panics, reads only what
// the header and each record announce within their bounds, and a bundle
// it passes opens every purchased candidate of the seed pool.
func FuzzVerify(f *testing.F) {
	items := randomItems(20, 12, 1)
	tr, _ := Commit(items, seedOf(1))
	bought := []int{1, 5, 19}
	var honest bytes.Buffer
	_ = WriteBundle(&honest, tr, bought, Format{})
	f.Add(honest.Bytes())
	f.Add(honest.Bytes()[:70])
	f.Add(append(honest.Bytes(), 1))
	f.Add(appendHeader(nil, Header{Root: tr.Root(), PoolSize: 1 << 39, Count: 1 << 39}))
	f.Add(appendHeader(nil, Header{Root: tr.Root(), PoolSize: 20, Count: 3, Format: Format{Kind: KindImages, Width: 4096, Height: 4096, Channels: 4}}))
	want := Expect{Root: tr.Root(), PoolSize: 20, Indices: bought}
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := Verify(bytes.NewReader(b), want, nil)
		if err == nil && rep.OK() && rep.Verified != len(bought) {
			t.Fatalf("an OK report with %d verified of %d", rep.Verified, len(bought))
		}
	})
}

// FuzzDecodeOpenings decodes arbitrary openings messages of a sample of
// three of a pool of 1,000, items of at most 64 bytes: never a panic, and
// what decodes has the sample's indices and paths of the right length.
func FuzzDecodeOpenings(f *testing.F) {
	items := randomItems(1000, 64, 2)
	tr, _ := Commit(items, seedOf(2))
	idx := []int{0, 511, 999}
	var ops []Opening
	for _, i := range idx {
		op, _ := tr.Open(i)
		ops = append(ops, op)
	}
	good := EncodeOpenings(ops)
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add([]byte{3, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := DecodeOpenings(b, idx, 1000, 64)
		if err != nil {
			return
		}
		for k, op := range got {
			if op.Index != idx[k] || len(op.Path) != PathLen(op.Index, 1000) || len(op.Item) > 64 {
				t.Fatalf("decoded %+v for candidate %d", op, idx[k])
			}
		}
	})
}

// FuzzParseRoot parses arbitrary roots (the data owner's hello carries
// one, state and result files another): never a panic, and what parses is
// 64 hex digits that print back as the same root.
func FuzzParseRoot(f *testing.F) {
	tr, _ := Commit(randomItems(3, 8, 3), seedOf(3))
	f.Add(tr.Root().String())
	f.Add(strings.ToUpper(tr.Root().String()))
	f.Add(tr.Root().String()[:63] + "g")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRoot(s)
		if err != nil {
			return
		}
		if len(s) != 2*HashSize || !strings.EqualFold(r.String(), s) {
			t.Fatalf("%q parsed as %s", s, r)
		}
		var u Root
		if err := u.UnmarshalText([]byte(s)); err != nil || u != r {
			t.Fatalf("UnmarshalText(%q) = %s, %v; ParseRoot gave %s", s, u, err, r)
		}
	})
}
