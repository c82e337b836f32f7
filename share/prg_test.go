package share

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/bits"
	"strings"
	"testing"
)

// testSeed returns a fixed seed whose bytes are i, i+1, …
func testSeed(i byte) Seed {
	var s Seed
	for j := range s {
		s[j] = i + byte(j)
	}
	return s
}

// TestPRGMatchesSpec recomputes the stream from its documented construction
// (HKDF-SHA256 → AES-128 key and counter block, CTR mode, words read
// little-endian) and pins the first words of one stream, so that a change of
// the stream, which would break interoperability between hosts, fails.
func TestPRGMatchesSpec(t *testing.T) {
	for _, tc := range []struct {
		seed   Seed
		domain string
	}{{testSeed(0), ""}, {testSeed(1), "input/p1"}, {testSeed(200), "beaver/triples/7"}} {
		km, err := hkdf.Key(sha256.New, tc.seed[:], nil, "selectformer/prg/aes128ctr/"+tc.domain, 32)
		must(t, err)
		block, err := aes.NewCipher(km[:16])
		must(t, err)
		ks := make([]byte, 8*100)
		cipher.NewCTR(block, km[16:]).XORKeyStream(ks, ks)
		got := NewPRG(tc.seed, tc.domain).Words(100)
		for i, w := range got {
			if want := binary.LittleEndian.Uint64(ks[8*i:]); w != want {
				t.Fatalf("%s: word %d = %#x, want %#x", tc.domain, i, w, want)
			}
		}
	}
	p := NewPRG(testSeed(0), "golden")
	if w0, w1 := p.Uint64(), p.Uint64(); w0 != goldenWords[0] || w1 != goldenWords[1] {
		t.Fatalf("stream changed: first words %#016x %#016x, want %#016x %#016x", w0, w1, goldenWords[0], goldenWords[1])
	}
}

// goldenWords are the first two words of NewPRG(testSeed(0), "golden").
var goldenWords = [2]uint64{0xf420bfbdd70b6fc6, 0x3616283fb50e2e06}

func TestPRGDeterminismAndIndependence(t *testing.T) {
	s0, s1 := testSeed(0), testSeed(1)
	streams := map[string][]uint64{
		"s0/a":        NewPRG(s0, "a").Words(64),
		"s0/b":        NewPRG(s0, "b").Words(64),
		"s1/a":        NewPRG(s1, "a").Words(64),
		"s0/":         NewPRG(s0, "").Words(64),
		"derive(s0)/": NewPRG(s0.Derive("a"), "a").Words(64),
	}
	for name, w := range streams {
		parts := strings.SplitN(name, "/", 2)
		var again []uint64
		switch parts[0] {
		case "s0":
			again = NewPRG(s0, parts[1]).Words(64)
		case "s1":
			again = NewPRG(s1, parts[1]).Words(64)
		default:
			again = NewPRG(s0.Derive("a"), "a").Words(64)
		}
		if firstDiff(w, again) >= 0 {
			t.Errorf("%s: stream not reproducible", name)
		}
		for other, v := range streams {
			if other == name {
				continue
			}
			// Independent 64-bit streams agree in a word with probability
			// 2^−64, and in about half of all bits.
			same := 0
			for i := range w {
				if w[i] == v[i] {
					t.Fatalf("%s and %s agree at word %d", name, other, i)
				}
				same += 64 - bits.OnesCount64(w[i]^v[i])
			}
			if math.Abs(float64(same)-2048) > 6*32 { // 4096 bits, sd 32
				t.Errorf("%s and %s agree on %d of 4096 bits", name, other, same)
			}
		}
	}
}

// TestPRGStatistics runs a bit-balance and a byte chi-square test on one
// fixed stream; with a fixed seed the outcome is deterministic, and the
// thresholds (6 standard deviations) are far from where AES output lands.
func TestPRGStatistics(t *testing.T) {
	p := NewPRG(testSeed(42), "stats")
	w := p.Words(1 << 15)
	ones := 0
	for _, v := range w {
		ones += bits.OnesCount64(v)
	}
	n := float64(len(w) * 64)
	if z := (float64(ones) - n/2) / (math.Sqrt(n) / 2); math.Abs(z) > 6 {
		t.Errorf("bit balance: %d ones of %g bits (z = %.1f)", ones, n, z)
	}
	var counts [256]float64
	for _, b := range wordBytes(w) {
		counts[b]++
	}
	exp := float64(len(w)*8) / 256
	chi2 := 0.0
	for _, c := range counts {
		chi2 += (c - exp) * (c - exp) / exp
	}
	// 255 degrees of freedom: mean 255, sd √510 ≈ 22.6.
	if chi2 < 255-6*22.6 || chi2 > 255+6*22.6 {
		t.Errorf("byte chi-square %.1f outside [%.0f, %.0f]", chi2, 255-6*22.6, 255+6*22.6)
	}
	// Per bit position: each of the 64 positions is balanced.
	for bit := range 64 {
		c := 0
		for _, v := range w {
			c += int(v >> bit & 1)
		}
		if z := (float64(c) - float64(len(w))/2) / (math.Sqrt(float64(len(w))) / 2); math.Abs(z) > 6 {
			t.Errorf("bit %d set in %d of %d words (z = %.1f)", bit, c, len(w), z)
		}
	}
}

// TestPRGMixedCalls checks that Uint64, Fill, Words and Read take consecutive
// parts of one stream, whatever their order and sizes.
func TestPRGMixedCalls(t *testing.T) {
	seed := testSeed(3)
	ref := NewPRG(seed, "mix").Words(400)
	refBytes := wordBytes(ref)
	p := NewPRG(seed, "mix")
	var got []byte
	add := func(ws ...uint64) {
		for _, w := range ws {
			got = binary.LittleEndian.AppendUint64(got, w)
		}
	}
	add(p.Uint64(), p.Uint64())
	add(p.Words(3)...)
	for range 70 {
		add(p.Uint64())
	}
	buf := make([]byte, 13)
	n, err := p.Read(buf)
	if n != 13 || err != nil {
		t.Fatalf("Read = %d, %v", n, err)
	}
	got = append(got, buf...)
	add(p.Uint64())
	rest := make([]byte, 8*200-len(got))
	_, _ = p.Read(rest)
	got = append(got, rest...)
	dst := make([]uint64, 100)
	p.Fill(dst)
	add(dst...)
	if !bytes.Equal(got, refBytes[:len(got)]) {
		t.Fatalf("mixed calls diverge from one Fill at byte %d", firstByteDiff(got, refBytes))
	}
	p.Fill(nil)
	if _, err := p.Read(nil); err != nil {
		t.Fatal(err)
	}
}

func firstByteDiff(x, y []byte) int {
	for i := range min(len(x), len(y)) {
		if x[i] != y[i] {
			return i
		}
	}
	return min(len(x), len(y))
}

func TestSeedDerive(t *testing.T) {
	s := testSeed(9)
	labels := []string{"", "a", "b", "dealer/0", "dealer/1", "a\x00"}
	seen := map[Seed]string{s: "parent"}
	for _, l := range labels {
		c := s.Derive(l)
		if c != s.Derive(l) {
			t.Fatalf("Derive(%q) not deterministic", l)
		}
		if prev, ok := seen[c]; ok {
			t.Fatalf("Derive(%q) equals %s", l, prev)
		}
		seen[c] = "Derive(" + l + ")"
	}
	if testSeed(10).Derive("a") == s.Derive("a") {
		t.Fatal("children of different parents collide")
	}
	if s.Derive("a").Derive("b") == s.Derive("b").Derive("a") {
		t.Fatal("derivation order does not matter")
	}
	// String hides the seed.
	str := s.String()
	if !strings.HasPrefix(str, "seed:") || strings.Contains(str, hex.EncodeToString(s[:4])) || str == testSeed(10).String() {
		t.Fatalf("String() = %q", str)
	}
	a, err := NewSeed()
	must(t, err)
	b, err := NewSeed()
	must(t, err)
	if a == b || a == (Seed{}) {
		t.Fatal("NewSeed returned repeated or zero seeds")
	}
}

func TestPRGIntn(t *testing.T) {
	p := NewPRG(testSeed(5), "intn")
	for _, n := range []int{1, 2, 3, 7, 10, 1000, math.MaxInt/2 + 1, math.MaxInt} {
		for range 500 {
			if v := p.Intn(n); v < 0 || v >= n {
				t.Fatalf("Intn(%d) = %d", n, v)
			}
		}
	}
	if p.Intn(1) != 0 {
		t.Fatal("Intn(1) ≠ 0")
	}
	// Uniformity over 10 values: chi-square with 9 degrees of freedom
	// (mean 9, sd √18 ≈ 4.2) on a fixed stream.
	const draws = 100000
	var counts [10]float64
	for range draws {
		counts[p.Intn(10)]++
	}
	chi2 := 0.0
	for _, c := range counts {
		chi2 += (c - draws/10) * (c - draws/10) / (draws / 10)
	}
	if chi2 > 9+6*4.25 {
		t.Errorf("Intn(10) counts %v: chi-square %.1f", counts, chi2)
	}
	// A bound of about 3/4 of the word range rejects about a quarter of all
	// words; the results still fill the range evenly.
	top, high := math.MaxInt/4*3, 0
	for range 200 {
		if p.Intn(top) >= top/3*2 {
			high++
		}
	}
	if high < 30 || high > 110 {
		t.Errorf("Intn(%d): %d of 200 draws in the top third, want about 67", top, high)
	}
	for _, n := range []int{0, -1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Intn(%d) did not panic", n)
				}
			}()
			p.Intn(n)
		}()
	}
}

// TestKeyStreamOverwritesDirtyDestination checks that Fill, Read and
// KeyStream write the key stream itself into buffers that hold garbage (the
// reused buffers of steady state), for lengths around the internal block of
// zeros: the result equals the reference CTR stream XORed into zeros, so no
// byte of the old contents leaks into the output.
func TestKeyStreamOverwritesDirtyDestination(t *testing.T) {
	key := make([]byte, 16)
	iv := make([]byte, 16)
	block, err := aes.NewCipher(key)
	must(t, err)
	for _, n := range []int{0, 1, 15, 4096, len(zeroBlock) - 1, len(zeroBlock), len(zeroBlock) + 1, 3*len(zeroBlock) + 17} {
		want := make([]byte, n)
		cipher.NewCTR(block, iv).XORKeyStream(want, want)
		got := bytes.Repeat([]byte{0xa5}, n)
		KeyStream(got, cipher.NewCTR(block, iv))
		if !bytes.Equal(got, want) {
			t.Errorf("KeyStream of %d bytes into a dirty buffer differs from the key stream", n)
		}
		// The PRG: Fill and Read into dirty buffers give the words of a
		// fresh stream filled into zeros.
		ref := NewPRG(testSeed(3), "dirty").Words(n/8 + 1)
		w := make([]uint64, n/8+1)
		for i := range w {
			w[i] = ^uint64(i)
		}
		NewPRG(testSeed(3), "dirty").Fill(w)
		for i := range w {
			if w[i] != ref[i] {
				t.Fatalf("Fill of %d words into a dirty buffer: word %d = %#x, want %#x", len(w), i, w[i], ref[i])
			}
		}
		b := bytes.Repeat([]byte{0x5a}, 8*len(w))
		if _, err := NewPRG(testSeed(3), "dirty").Read(b); err != nil {
			t.Fatal(err)
		}
		for i := range ref {
			if v := binary.LittleEndian.Uint64(b[8*i:]); v != ref[i] {
				t.Fatalf("Read of %d bytes into a dirty buffer: word %d = %#x, want %#x", len(b), i, v, ref[i])
			}
		}
	}
}

// TestHostLittleEndian: the reported byte order is the one a word's memory
// shows.
func TestHostLittleEndian(t *testing.T) {
	b := wordBytes([]uint64{0x0102030405060708})
	if got, want := HostLittleEndian(), b[0] == 0x08; got != want {
		t.Fatalf("HostLittleEndian() = %v, the first byte of 0x0102030405060708 in memory is %#x", got, b[0])
	}
}
