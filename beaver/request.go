package beaver

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/selectformer/selectformer/share"
)

// Kind names a kind of correlation. It is part of the PRG domain of every
// item, so two parties asking for different kinds at the same counter get
// unrelated (useless) material rather than a silent mix.
type Kind uint8

// Kind 10 is reserved: it was the weight mask's, which is no stream kind
// but a per-weight-matrix correlation of its own (Provider.WeightMask).
// Kinds are registered with their descriptors (Register): KindTriple and
// the others in kind_arith.go, kind_matrix.go and kind_binary.go.

// String returns the kind's name, e.g. "triple".
func (k Kind) String() string {
	if c := k.spec(); c != nil {
		return c.Name
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// MaxItemWords bounds the number of ring words of any one part of one item
// (e.g. A of a triple): 2^27 words, 1 GiB. Larger requests are refused.
const MaxItemWords = 1 << 27

// Request describes one item of correlated randomness: its kind, its address
// (Stream, Counter) and its parameters. It is both what a caller asks a
// Provider for (Provider.Material, with Counter zero: the provider assigns
// it) and what the party a kind is dealt to sends the networked dealer
// (AppendBinary, with the counter). Which size fields are used depends on Kind (its Correlation's
// Fields): N for Triple, Square, SquareProduct, AND and CrossAND (words), Trunc and
// BitPair; Batch, M, K, N for MatTriple; M, K, N and WeightID for
// WeightTriple; M, N and WeightID for WeightVectorTriple; M (rows) and N
// (width) for RowBitTriple. Unused fields must be zero.
//
// RingBits (MatTriple and SquareProduct, the kinds with FieldRingBits) asks
// for material in the ring Z_2^RingBits instead of Z_2^64: 0 means 64 (every
// request before it), and a set value must be 2 ≤ RingBits ≤ 63. Only the
// low RingBits bits of such material are defined (Typed.MatTriplesRing and
// Typed.SquareProductsRing mask them), which lets a dealer-free generator
// make it with fewer correction bits (beaver/ot). A provider may ignore it
// and hand out material mod 2^64: a triple (or a square-and-product
// quadruple) mod 2^64 reduced mod 2^ℓ is one mod 2^ℓ (the dealer and the
// seeded providers do so).
type Request struct {
	Kind     Kind
	Stream   uint32
	Counter  uint64
	WeightID uint64
	Batch    int
	M, K, N  int
	FracBits uint
	RingBits uint
}

// MinRingBits and MaxRingBits bound a set Request.RingBits (0 means 64).
const (
	MinRingBits = 2
	MaxRingBits = 63
)

// Ring returns the width of the ring the request's material lives in: 64
// when RingBits is 0, RingBits otherwise.
func (r Request) Ring() uint {
	if r.RingBits == 0 {
		return 64
	}
	return r.RingBits
}

// ringMask returns the low Ring() bits set: the bits of a word of the
// request's material that are defined.
func (r Request) ringMask() uint64 { return ^uint64(0) >> (64 - r.Ring()) }

// String describes the request for error messages.
func (r Request) String() string {
	format := formatN
	if c := r.Kind.spec(); c != nil {
		format = c.Format
	}
	ring := ""
	if r.RingBits != 0 {
		ring = fmt.Sprintf(" mod 2^%d", r.RingBits)
	}
	return fmt.Sprintf("%v %s%s stream %d #%d", r.Kind, format(r), ring, r.Stream, r.Counter)
}

// Validate checks the kind and the sizes (non-negative, unused fields zero,
// every part at most MaxItemWords words, and the kind's own checks, e.g.
// 1 ≤ FracBits ≤ 62 for Trunc), and the ring width (RingBits zero for a kind
// without FieldRingBits, else 0 or MinRingBits..MaxRingBits).
func (r Request) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("beaver: bad request %v: %s", r, fmt.Sprintf(format, args...))
	}
	c := r.Kind.spec()
	if c == nil {
		return bad("unknown kind")
	}
	if c.Fields&FieldFracBits == 0 && r.FracBits != 0 {
		return bad("fracBits given for a kind without it")
	}
	if c.Fields&FieldWeightID == 0 && r.WeightID != 0 {
		return bad("weight id given for a kind without weights")
	}
	if c.Fields&FieldRingBits == 0 && r.RingBits != 0 {
		return bad("ring width given for a kind without it")
	}
	if r.RingBits != 0 && (r.RingBits < MinRingBits || r.RingBits > MaxRingBits) {
		return bad("ring width %d bits: need %d..%d (0 for 64)", r.RingBits, MinRingBits, MaxRingBits)
	}
	var unused []string
	nonzero := false
	for i, v := range r.sizes() {
		if c.Fields&fieldNames[i].f == 0 {
			unused = append(unused, fieldNames[i].name)
			nonzero = nonzero || v != 0
		}
	}
	if nonzero {
		return bad("%s must be zero for this kind", strings.Join(unused, ", "))
	}
	if c.Check != nil {
		if err := c.Check(r); err != nil {
			return bad("%v", err)
		}
	}
	for _, d := range c.Dims(r) {
		if _, err := share.BoundedProduct(MaxItemWords, d...); err != nil {
			return bad("%v", err)
		}
	}
	return nil
}

// LocalWords returns the words of each part of party's local expansion of
// a valid request (Correlation.Local): what a seeded provider expands from
// its session seed, and a dealer for both parties.
func (r Request) LocalWords(party int) []int {
	if c := r.Kind.spec(); c != nil {
		return c.Local(r, party)
	}
	return nil
}

// PartWords returns the length of each part of party's Material for a
// valid request (see Material): a part the party does not get has length 0
// (and is nil).
func (r Request) PartWords(party int) []int {
	if c := r.Kind.spec(); c != nil {
		return c.Parts(r, party)
	}
	return nil
}

// MaxPartWords returns the words of the largest part the dealer computes
// for a valid request r: either party's local parts, the model owner's
// weight mask and the correction. A networked dealer refuses a request whose
// MaxPartWords exceeds ServerOptions.MaxRequestWords before allocating any
// of it.
func (r Request) MaxPartWords() int {
	m := max(r.CorrectionWords(0), r.CorrectionWords(1))
	for p := range 2 {
		for _, w := range r.LocalWords(p) {
			m = max(m, w)
		}
	}
	return max(m, r.maskWords())
}

// maskWords returns the words of the weight mask the dealer expands for a
// kind with a Mask (0 for the others).
func (r Request) maskWords() int {
	if c := r.Kind.spec(); c != nil && c.Mask != nil {
		k, n := c.Mask(r)
		return k * n
	}
	return 0
}

// MACs returns the multiply-adds of the matrix product the dealer computes
// for a valid request r: Batch·M·K·N for a MatTriple, M·K·N for a
// WeightTriple, 0 for the elementwise kinds.
func (r Request) MACs() uint64 {
	if c := r.Kind.spec(); c != nil && c.MACs != nil {
		return c.MACs(r)
	}
	return 0
}

// DealerWork returns the dealer's cost of serving a valid request r, in work
// units: every word it expands or sends for r (both parties' local parts,
// the model owner's weight mask, the correction) plus the multiply-adds of
// its matrix product (MACs). A networked dealer charges each request's
// DealerWork against its session's budget (ConnectOptions.Budget); the sum
// over a rehearsal's requests (Rehearsal.Requests) is what a computation
// needs.
func (r Request) DealerWork() uint64 {
	w := uint64(r.CorrectionWords(0)) + uint64(r.CorrectionWords(1)) + uint64(r.maskWords()) + r.MACs()
	for p := range 2 {
		for _, n := range r.LocalWords(p) {
			w += uint64(n)
		}
	}
	return w
}

// Work returns the sum of DealerWork over reqs: the session budget
// (ConnectOptions.Budget) that drawing exactly reqs from a networked
// dealer needs.
func Work(reqs []Request) uint64 {
	var w uint64
	for _, r := range reqs {
		w += r.DealerWork()
	}
	return w
}

// CorrectionWords returns the number of ring words the dealer sends party
// for this request (0 for a party the kind gives no dealer words: each
// built-in kind deals to one party, Correlation.DealtTo).
func (r Request) CorrectionWords(party int) int {
	if c := r.Kind.spec(); c != nil && c.DealtTo[party] {
		return c.Dealt(r, party)
	}
	return 0
}

// DealtTo reports whether the kind of r gives party dealer words
// (Correlation.DealtTo), so that party asks the dealer for every item of
// it.
func (r Request) DealtTo(party int) bool {
	c := r.Kind.spec()
	return c != nil && c.DealtTo[party]
}

// RequestSize is the length of an encoded Request (AppendBinary).
const RequestSize = 40

// requestVersion is the first byte of every encoded request.
const requestVersion = 1

// AppendBinary appends the 40-byte wire encoding of r: version, kind,
// fracBits, ringBits (0 for 64: the byte was reserved and zero before ring
// widths, so older encodings decode unchanged), then little-endian stream (4), counter (8),
// weight id (8), batch, m, k, n (4 each).
func (r Request) AppendBinary(b []byte) ([]byte, error) {
	for _, v := range []int{r.Batch, r.M, r.K, r.N} {
		if v < 0 || v > MaxItemWords {
			return b, fmt.Errorf("beaver: encode request %v: size %d out of range", r, v)
		}
	}
	if r.FracBits > 255 {
		return b, fmt.Errorf("beaver: encode request %v: fracBits out of range", r)
	}
	if r.RingBits > 255 {
		return b, fmt.Errorf("beaver: encode request %v: ringBits out of range", r)
	}
	b = append(b, requestVersion, byte(r.Kind), byte(r.FracBits), byte(r.RingBits))
	b = binary.LittleEndian.AppendUint32(b, r.Stream)
	b = binary.LittleEndian.AppendUint64(b, r.Counter)
	b = binary.LittleEndian.AppendUint64(b, r.WeightID)
	for _, v := range []int{r.Batch, r.M, r.K, r.N} {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b, nil
}

// DecodeRequest parses and validates an encoded request (see AppendBinary).
// It never panics: a wrong length or version, or an invalid request (an
// unknown kind among them, a ring width out of range or given for a kind
// without one) is an error.
func DecodeRequest(b []byte) (Request, error) {
	var r Request
	if len(b) != RequestSize {
		return r, fmt.Errorf("beaver: request of %d bytes, want %d", len(b), RequestSize)
	}
	if b[0] != requestVersion {
		return r, fmt.Errorf("beaver: request version %d, want %d", b[0], requestVersion)
	}
	r.Kind = Kind(b[1])
	r.FracBits = uint(b[2])
	r.RingBits = uint(b[3])
	r.Stream = binary.LittleEndian.Uint32(b[4:])
	r.Counter = binary.LittleEndian.Uint64(b[8:])
	r.WeightID = binary.LittleEndian.Uint64(b[16:])
	dims := [4]*int{&r.Batch, &r.M, &r.K, &r.N}
	for i, d := range dims {
		v := binary.LittleEndian.Uint32(b[24+4*i:])
		if v > MaxItemWords {
			return r, fmt.Errorf("beaver: request size %d exceeds %d", v, MaxItemWords)
		}
		*d = int(v)
	}
	if err := r.Validate(); err != nil {
		return r, err
	}
	return r, nil
}
