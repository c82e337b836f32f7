package beaver

import (
	"encoding/binary"
	"fmt"

	"github.com/selectformer/selectformer/share"
)

// Kind names a kind of correlation. It is part of the PRG domain of every
// item, so two parties asking for different kinds at the same counter get
// unrelated (useless) material rather than a silent mix.
type Kind uint8

// The correlation kinds, one per typed helper of Typed. KindWeightMask is
// the model owner's reusable mask of a weight matrix: keyed by weight id, not
// by stream and counter, expanded by party 0 itself and never requested from
// the dealer (DecodeRequest refuses it).
const (
	KindTriple Kind = iota + 1
	KindSquare
	KindMatTriple
	KindWeightTriple
	KindWeightVectorTriple
	KindAND
	KindCrossAND
	KindTrunc
	KindBitPair
	KindWeightMask
	kindEnd
)

var kindNames = [...]string{
	KindTriple:             "triple",
	KindSquare:             "square",
	KindMatTriple:          "mattriple",
	KindWeightTriple:       "weighttriple",
	KindWeightVectorTriple: "weightvectortriple",
	KindAND:                "and",
	KindCrossAND:           "crossand",
	KindTrunc:              "trunc",
	KindBitPair:            "bitpair",
	KindWeightMask:         "weightmask",
}

// String returns the kind's name, e.g. "triple".
func (k Kind) String() string {
	if k >= 1 && k < kindEnd {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// MaxItemWords bounds the number of ring words of any one part of one item
// (e.g. A of a triple): 2^27 words, 1 GiB. Larger requests are refused.
const MaxItemWords = 1 << 27

// Request describes one item of correlated randomness: its kind, its address
// (Stream, Counter) and its parameters. It is both what a caller asks a
// Provider for (Provider.Material, with Counter zero: the provider assigns
// it) and what party 1 sends the networked dealer (AppendBinary, with the
// counter). Which size fields are used depends on Kind: N for Triple, Square,
// AND and CrossAND (words), Trunc and BitPair; Batch, M, K, N for MatTriple;
// M, K, N and WeightID for WeightTriple; M, N and WeightID for
// WeightVectorTriple; K, N and WeightID for WeightMask (whose Stream and
// Counter are zero). Unused fields must be zero.
type Request struct {
	Kind     Kind
	Stream   uint32
	Counter  uint64
	WeightID uint64
	Batch    int
	M, K, N  int
	FracBits uint
}

// String describes the request for error messages.
func (r Request) String() string {
	switch r.Kind {
	case KindMatTriple:
		return fmt.Sprintf("%v %d×(%d×%d·%d×%d) stream %d #%d", r.Kind, r.Batch, r.M, r.K, r.K, r.N, r.Stream, r.Counter)
	case KindWeightTriple:
		return fmt.Sprintf("%v w%d %d×%d·%d×%d stream %d #%d", r.Kind, r.WeightID, r.M, r.K, r.K, r.N, r.Stream, r.Counter)
	case KindWeightVectorTriple:
		return fmt.Sprintf("%v w%d %d×%d stream %d #%d", r.Kind, r.WeightID, r.M, r.N, r.Stream, r.Counter)
	case KindTrunc:
		return fmt.Sprintf("%v n=%d f=%d stream %d #%d", r.Kind, r.N, r.FracBits, r.Stream, r.Counter)
	case KindWeightMask:
		return fmt.Sprintf("%v w%d %d×%d", r.Kind, r.WeightID, r.K, r.N)
	default:
		return fmt.Sprintf("%v n=%d stream %d #%d", r.Kind, r.N, r.Stream, r.Counter)
	}
}

// Validate checks the kind and the sizes (non-negative, unused fields zero,
// every part at most MaxItemWords words, 1 ≤ FracBits ≤ 62 for Trunc, Stream
// and Counter zero for WeightMask).
func (r Request) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("beaver: bad request %v: %s", r, fmt.Sprintf(format, args...))
	}
	zero := func(names string, vals ...int) error {
		for _, v := range vals {
			if v != 0 {
				return bad("%s must be zero for this kind", names)
			}
		}
		return nil
	}
	if r.Kind != KindTrunc && r.FracBits != 0 {
		return bad("fracBits given for a kind other than trunc")
	}
	if r.Kind != KindWeightTriple && r.Kind != KindWeightVectorTriple && r.Kind != KindWeightMask && r.WeightID != 0 {
		return bad("weight id given for a kind without weights")
	}
	var dims [][]int
	switch r.Kind {
	case KindTriple, KindSquare, KindAND, KindCrossAND, KindBitPair:
		if err := zero("batch, m, k", r.Batch, r.M, r.K); err != nil {
			return err
		}
		dims = [][]int{{r.N}}
	case KindTrunc:
		if err := zero("batch, m, k", r.Batch, r.M, r.K); err != nil {
			return err
		}
		if r.FracBits < 1 || r.FracBits > 62 {
			return bad("fracBits %d outside [1, 62]", r.FracBits)
		}
		dims = [][]int{{r.N}}
	case KindMatTriple:
		dims = [][]int{{r.Batch, r.M, r.K}, {r.Batch, r.K, r.N}, {r.Batch, r.M, r.N}}
	case KindWeightTriple:
		if err := zero("batch", r.Batch); err != nil {
			return err
		}
		dims = [][]int{{r.M, r.K}, {r.K, r.N}, {r.M, r.N}}
	case KindWeightVectorTriple:
		if err := zero("batch, k", r.Batch, r.K); err != nil {
			return err
		}
		dims = [][]int{{r.M, r.N}}
	case KindWeightMask:
		if err := zero("batch, m", r.Batch, r.M); err != nil {
			return err
		}
		if r.Stream != 0 || r.Counter != 0 {
			return bad("a weight mask is keyed by its weight id alone: stream and counter must be zero")
		}
		dims = [][]int{{r.K, r.N}}
	default:
		return bad("unknown kind")
	}
	for _, d := range dims {
		if _, err := share.BoundedProduct(MaxItemWords, d...); err != nil {
			return bad("%v", err)
		}
	}
	return nil
}

// words returns the number of words of each part of party's local expansion
// and of the dealer's correction to party 1, for a valid request.
func (r Request) localWords(party int) []int {
	n := r.N
	switch r.Kind {
	case KindTriple, KindAND:
		if party == 0 {
			return []int{n, n, n}
		}
		return []int{n, n}
	case KindSquare:
		if party == 0 {
			return []int{n, n}
		}
		return []int{n}
	case KindCrossAND:
		if party == 0 {
			return []int{n, n} // u, C0
		}
		return []int{n} // v
	case KindMatTriple:
		a, b, c := r.Batch*r.M*r.K, r.Batch*r.K*r.N, r.Batch*r.M*r.N
		if party == 0 {
			return []int{a, b, c}
		}
		return []int{a, b}
	case KindWeightTriple:
		if party == 0 {
			return []int{r.M * r.N} // C0
		}
		return []int{r.M * r.K} // A
	case KindWeightVectorTriple:
		return []int{r.M * r.N} // C0 or A
	case KindWeightMask:
		if party == 0 {
			return []int{r.K * r.N}
		}
		return nil
	case KindTrunc:
		if party == 0 {
			return []int{n, n, n}
		}
		return []int{n}
	case KindBitPair:
		w := share.PackedWords(n)
		if party == 0 {
			return []int{w, n, n, n} // Packed, Arith, A, AR
		}
		return []int{w, n} // Packed, A
	}
	return nil
}

// PartWords returns the length of each part of party's Material for a
// valid request (see Material): a part the party does not get has length 0
// (and is nil). Party 1 gets no part of a WeightMask.
func (r Request) PartWords(party int) []int {
	n := r.N
	switch r.Kind {
	case KindTriple, KindAND, KindTrunc:
		return []int{n, n, n}
	case KindSquare:
		return []int{n, n}
	case KindMatTriple:
		return []int{r.Batch * r.M * r.K, r.Batch * r.K * r.N, r.Batch * r.M * r.N}
	case KindWeightTriple, KindWeightVectorTriple:
		a := r.M * r.K
		if r.Kind == KindWeightVectorTriple {
			a = r.M * r.N
		}
		if party == 0 {
			a = 0
		}
		return []int{a, r.M * r.N}
	case KindCrossAND:
		if party == 0 {
			return []int{n, 0, n}
		}
		return []int{0, n, n}
	case KindBitPair:
		return []int{share.PackedWords(n), n, n, n}
	case KindWeightMask:
		if party == 0 {
			return []int{r.K * r.N}
		}
		return nil
	}
	return nil
}

// MaxPartWords returns the words of the largest part the dealer computes
// for a valid request r: either party's local parts, the model owner's
// weight mask and the correction. A networked dealer refuses a request whose
// MaxPartWords exceeds ServerOptions.MaxRequestWords before allocating any
// of it.
func (r Request) MaxPartWords() int {
	m := r.CorrectionWords()
	for p := range 2 {
		for _, w := range r.localWords(p) {
			m = max(m, w)
		}
	}
	return max(m, r.maskWords())
}

// maskWords returns the words of the weight mask the dealer expands for a
// weight kind (0 for the others).
func (r Request) maskWords() int {
	switch r.Kind {
	case KindWeightTriple:
		return r.K * r.N
	case KindWeightVectorTriple:
		return r.N
	}
	return 0
}

// MACs returns the multiply-adds of the matrix product the dealer computes
// for a valid request r: Batch·M·K·N for a MatTriple, M·K·N for a
// WeightTriple, 0 for the elementwise kinds.
func (r Request) MACs() uint64 {
	switch r.Kind {
	case KindMatTriple:
		return uint64(r.Batch) * uint64(r.M) * uint64(r.K) * uint64(r.N)
	case KindWeightTriple:
		return uint64(r.M) * uint64(r.K) * uint64(r.N)
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
	w := uint64(r.CorrectionWords()) + uint64(r.maskWords()) + r.MACs()
	for p := range 2 {
		for _, n := range r.localWords(p) {
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

// CorrectionWords returns the number of ring words the dealer sends party 1
// for this request (party 0 never receives any).
func (r Request) CorrectionWords() int {
	switch r.Kind {
	case KindTriple, KindSquare, KindAND, KindCrossAND:
		return r.N
	case KindMatTriple:
		return r.Batch * r.M * r.N
	case KindWeightTriple, KindWeightVectorTriple:
		return r.M * r.N
	case KindTrunc, KindBitPair:
		return 2 * r.N
	}
	return 0
}

// requestSize is the length of an encoded Request.
const requestSize = 40

// requestVersion is the first byte of every encoded request.
const requestVersion = 1

// AppendBinary appends the 40-byte wire encoding of r: version, kind,
// fracBits, a zero byte, then little-endian stream (4), counter (8),
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
	b = append(b, requestVersion, byte(r.Kind), byte(r.FracBits), 0)
	b = binary.LittleEndian.AppendUint32(b, r.Stream)
	b = binary.LittleEndian.AppendUint64(b, r.Counter)
	b = binary.LittleEndian.AppendUint64(b, r.WeightID)
	for _, v := range []int{r.Batch, r.M, r.K, r.N} {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b, nil
}

// DecodeRequest parses and validates an encoded request (see AppendBinary).
// It never panics: a wrong length, version, reserved byte, an invalid request
// or a request for a weight mask (which the dealer never serves) is an error.
func DecodeRequest(b []byte) (Request, error) {
	var r Request
	if len(b) != requestSize {
		return r, fmt.Errorf("beaver: request of %d bytes, want %d", len(b), requestSize)
	}
	if b[0] != requestVersion {
		return r, fmt.Errorf("beaver: request version %d, want %d", b[0], requestVersion)
	}
	if b[3] != 0 {
		return r, fmt.Errorf("beaver: request reserved byte is %d, want 0", b[3])
	}
	r.Kind = Kind(b[1])
	r.FracBits = uint(b[2])
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
	if r.Kind == KindWeightMask {
		return r, errWeightMaskRequest(r)
	}
	return r, nil
}

// errWeightMaskRequest refuses a weight mask request to the dealer: the
// model owner expands its masks locally from its session seed.
func errWeightMaskRequest(r Request) error {
	return fmt.Errorf("beaver: bad request %v: the dealer serves no weight masks (the model owner expands them from its session seed)", r)
}
