package beaver

import (
	"fmt"
	"slices"
)

// Correlation describes one kind of correlated randomness: everything the
// request codec, the dealers (in-process and networked) and the seeded
// providers know about it. Each kind registers its Correlation once
// (Register, from an init function) in the file of its family:
// kind_arith.go (triple, square, squareproduct, wrap, bitpair, rowbittriple), kind_matrix.go
// (mattriple, weighttriple, weightvectortriple), kind_binary.go (and,
// crossand). Such a file holds all of a kind: its Kind constant, its typed
// material and Typed helper, its registration and the functions of its
// descriptor. A provider that makes material another way (the OT provider
// of beaver/ot) keeps its own registry of generators keyed by Kind.
//
// How material is made from a descriptor: party p expands its local parts
// (Local) from the AES-CTR stream of its session seed for (p, Name, stream)
// at the item's counter; the dealer expands both parties' local parts (and
// the model owner's weight mask, Mask) and computes each party's dealer
// words (Deal; DealtTo says which parties get any); party p then lays out
// its Material (Assemble) from its local parts and its dealer words.
type Correlation struct {
	// Kind is the kind's wire id (the second byte of an encoded request):
	// never reuse or renumber one.
	Kind Kind
	// Name names the kind in String and errors, and is part of the PRG
	// domain of its streams: changing it changes every word of material.
	Name string
	// Fields are the size fields of Request the kind uses; the others must
	// be zero (Validate).
	Fields Fields
	// Dims returns the dimensions of each part of a request whose used
	// fields are non-negative: Validate bounds each product by
	// MaxItemWords.
	Dims func(r Request) [][]int
	// Check, if set, checks what Fields and Dims do not (e.g. the range of
	// FracBits).
	Check func(r Request) error
	// Format describes the sizes of r for String, e.g. "n=5".
	Format func(r Request) string

	// Local returns the words of each part of party's local expansion.
	Local func(r Request, party int) []int
	// Parts returns the words of each part of party's Material (0 for a
	// part the party does not get, which is nil).
	Parts func(r Request, party int) []int
	// DealtTo says which parties get dealer words: such a party asks the
	// dealer for every item of the kind (and each request is charged
	// Request.DealerWork against the session's budget). At least one does.
	DealtTo [2]bool
	// Dealt returns the number of dealer words party gets for r (0 for a
	// party not in DealtTo).
	Dealt func(r Request, party int) int
	// Deal computes the dealer words of both parties (out[p] has
	// Dealt(r, p) words, whatever they hold) from both parties' local
	// parts and, for a kind with a Mask, the model owner's weight mask.
	Deal func(r Request, x Expansion, out [2][]uint64) error
	// Assemble returns the parts of party's Material (the lengths Parts
	// gives) from its local parts and its dealer words; it may reuse and
	// change their slices.
	Assemble func(r Request, party int, local [][]uint64, dealt []uint64) [][]uint64
	// Verify returns an error unless the material m0 (party 0's parts) and
	// m1 (party 1's) of r satisfy the correlation, mask being the model
	// owner's weight mask for a kind with a Mask (nil otherwise): what the
	// tests check of every provider.
	Verify func(r Request, mask []uint64, m0, m1 [][]uint64) error
	// Sample is a small valid request of the kind (Counter zero), which
	// the registry's tests walk through every provider.
	Sample Request

	// Mask, if set, returns the shape (k×n) of the model owner's weight
	// mask of r.WeightID that Deal needs.
	Mask func(r Request) (k, n int)
	// MACs, if set, returns the multiply-adds of the dealer's matrix
	// product (Request.MACs).
	MACs func(r Request) uint64
}

// Expansion is what the dealer computes an item's dealer words from: both
// parties' local parts and, for a kind with a Mask, the model owner's
// weight mask.
type Expansion struct {
	Local [2][][]uint64
	Mask  []uint64
}

// Fields is a set of the size fields of a Request.
type Fields uint8

// The size fields of a Request.
const (
	FieldBatch Fields = 1 << iota
	FieldM
	FieldK
	FieldN
	FieldWeightID
	FieldFracBits
	// FieldRingBits: the kind accepts Request.RingBits (material mod
	// 2^RingBits).
	FieldRingBits
)

// registry holds the registered correlations by kind.
var registry [256]*Correlation

// Register adds the correlation kind c describes. It must be called from an
// init function: it panics (a programming error) if c is incomplete (a
// required function missing, no name, no party in DealtTo, a Sample that is
// not a valid request of the kind) or if its kind or name is already
// registered.
func Register(c Correlation) {
	fail := func(why string) {
		panic(fmt.Sprintf("beaver: register kind %d (%q): %s", uint8(c.Kind), c.Name, why))
	}
	switch {
	case c.Kind == 0:
		fail("kind 0 is reserved")
	case c.Name == "":
		fail("no name")
	case c.Dims == nil || c.Format == nil || c.Local == nil || c.Parts == nil || c.Dealt == nil ||
		c.Deal == nil || c.Assemble == nil || c.Verify == nil:
		fail("incomplete descriptor: Dims, Format, Local, Parts, Dealt, Deal, Assemble and Verify are required")
	case !c.DealtTo[0] && !c.DealtTo[1]:
		fail("no party gets dealer words (DealtTo)")
	case registry[c.Kind] != nil:
		fail(fmt.Sprintf("kind id already registered as %q", registry[c.Kind].Name))
	}
	for _, o := range registry {
		if o != nil && o.Name == c.Name {
			fail(fmt.Sprintf("name already registered for kind %d", uint8(o.Kind)))
		}
	}
	d := c
	registry[c.Kind] = &d
	if c.Sample.Kind != c.Kind {
		registry[c.Kind] = nil
		fail("Sample is not a request of the kind")
	}
	if err := c.Sample.Validate(); err != nil {
		registry[c.Kind] = nil
		fail(fmt.Sprintf("invalid Sample: %v", err))
	}
}

// Lookup returns the registered correlation of kind k.
func Lookup(k Kind) (Correlation, bool) {
	if c := registry[k]; c != nil {
		return *c, true
	}
	return Correlation{}, false
}

// Kinds returns the registered kinds in increasing order.
func Kinds() []Kind {
	var ks []Kind
	for k, c := range registry {
		if c != nil {
			ks = append(ks, Kind(k))
		}
	}
	return slices.Clip(ks)
}

// spec returns the descriptor of a registered kind, nil for an unknown one.
func (k Kind) spec() *Correlation { return registry[k] }

// fieldNames lists the size fields with their names, in Request's order.
var fieldNames = [...]struct {
	f    Fields
	name string
}{{FieldBatch, "batch"}, {FieldM, "m"}, {FieldK, "k"}, {FieldN, "n"}}

// sizes returns r's size fields batch, m, k and n, in fieldNames' order.
func (r Request) sizes() [4]int { return [4]int{r.Batch, r.M, r.K, r.N} }

// formatN is the Format of the kinds sized by N alone.
func formatN(r Request) string { return fmt.Sprintf("n=%d", r.N) }

// dimsN is the Dims of the kinds sized by N alone.
func dimsN(r Request) [][]int { return [][]int{{r.N}} }

// nWords returns a Local or Parts of the elementwise kinds: p0 parts
// of r.N words for party 0, p1 for party 1.
func nWords(p0, p1 int) func(Request, int) []int {
	return func(r Request, party int) []int {
		k := p0
		if party == 1 {
			k = p1
		}
		out := make([]int, k)
		for i := range out {
			out[i] = r.N
		}
		return out
	}
}

// dealtN returns a Dealt giving party to k·N words and the other party
// none.
func dealtN(to, k int) func(Request, int) int {
	return func(r Request, party int) int {
		if party == to {
			return k * r.N
		}
		return 0
	}
}

// Where the built-in kinds' dealer words go: each kind's are dealt to one
// party, the one whose registration names it (toParty0 or toParty1), so
// that the dealer's bytes split over both of its links. The kinds whose
// words go to party 0 (the weight kinds, bit pairs and cross-party AND
// triples) and those whose words go to party 1 (elementwise, square and
// matrix triples, square-and-product quadruples, wrap pairs, AND triples,
// row-bit triples) carry about equal dealer bytes in a transformer's forward
// (28.0 MB a candidate of qqp-bert's phase-2 proxy before its attention was
// folded: 14.0 MB each way).
//
// Dealing to either party reveals nothing new. The dealt party d gets
// words W = f(x) − S, where f(x) is the relation on both parties' local
// parts (e.g. (A0+A1)·(B0+B1)) and S is the part of the same relation that
// the other party 1−d expands from its own session seed (e.g. C_{1−d}):
// S is uniform and independent of everything party d holds (party d knows
// neither the other's seed nor its local parts), so W is a one-time pad
// and party d's view (its local parts and W) is uniform whatever the other
// party's parts; the other party receives nothing. Which party is dealt
// only decides which share is the pad and which the dealer's.
var (
	toParty0 = [2]bool{true, false}
	toParty1 = [2]bool{false, true}
)
