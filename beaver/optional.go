package beaver

import "context"

// Optional behaviour. A provider may do more than the Provider core: hold
// state per weight id (WeightReleaser), announce a session budget to a
// dealer (SessionBudgeter), report counters of its own (the dealer-free
// provider's OT and HE statistics). A caller finds such behaviour with As,
// through every wrapper between it and the provider that has it, the way
// errors.As finds an error in a chain: a wrapper embeds the Provider it
// wraps, overrides what it changes, and says what it wraps with Unwrap. It
// never re-implements an optional interface only to pass the call on.
//
// Sequencer is not optional behaviour in this sense: MaterialSeq draws
// material, so a wrapper that changes Material must change MaterialSeq too
// (or not offer it), and DrawSequence asks the provider it is given, never
// one it wraps.

// Wrapper is implemented by every provider that wraps another: Unwrap
// returns the wrapped provider (As follows it).
type Wrapper interface {
	Unwrap() Provider
}

// As returns the first provider of p's chain (p, then what p wraps, per
// Wrapper, and so on) that is a T, and whether there is one. T is usually an
// interface of optional behaviour (WeightReleaser, SessionBudgeter) or a
// provider's concrete type.
func As[T any](p Provider) (T, bool) {
	// A chain longer than this is a cycle: a wrapper that wraps itself.
	const maxDepth = 64
	for range maxDepth {
		if p == nil {
			break
		}
		if t, ok := p.(T); ok {
			return t, true
		}
		w, ok := p.(Wrapper)
		if !ok {
			break
		}
		p = w.Unwrap()
	}
	var zero T
	return zero, false
}

// Unwrap returns the provider t wraps: Typed is a wrapper like any other.
func (t Typed) Unwrap() Provider { return t.Provider }

// WeightReleaser is implemented by the providers that hold state per weight
// id for the rest of a session (the dealer-free provider with lattice
// encryption keeps each encrypted weight it received, several GB for a
// selection phase's proxy). Selection calls it (found with As) when a
// phase's forward is done: that phase's weight ids are never drawn again.
type WeightReleaser interface {
	// ReleaseWeights drops what the provider holds for the weight ids in
	// [lo, hi). A later request for a released id is the provider's to
	// refuse or serve afresh.
	ReleaseWeights(lo, hi uint64)
}

// SessionBudgeter is implemented by the providers that announce a session
// budget to a dealer when they bind a session (a networked dealer's
// client). Selection's model owner finds it with As and calls it before
// BindSession with the budget the selection's public shapes need
// (selection.DealerBudget); a provider without it announces nothing, so
// the budget is not computed.
type SessionBudgeter interface {
	// SetSessionBudget sets the budget of dealer work (Request.DealerWork
	// units) computed from the computation's shapes, announced at the next
	// BindSession.
	SetSessionBudget(work uint64)
}

// Describer is implemented by the providers whose two parties must make
// their correlations the same way (a dealer's client and the dealer-free
// provider, whose parties must run the same generator with the same
// parameters). Selection announces Describe (found with As) in its hello
// and refuses a difference by name before the coin, so a party never binds
// a session, nor sends its bootstrap, to a peer that makes its
// correlations otherwise.
type Describer interface {
	// Describe says publicly how the provider makes its correlations.
	Describe() Description
}

// Description says publicly how a provider makes its correlations.
type Description struct {
	// Source is the way, by the names of the peer binaries' -provider
	// flag (beaver/source): "dealer", "ot" or "he".
	Source string
	// Params is a digest (hex) of the parameters of the way that both
	// parties must share (the HE parameters of "he"); "" when it has none.
	Params string
}

// Describe returns the Description of the first provider of p's chain that
// is a Describer (As), the zero Description when none is.
func Describe(p Provider) Description {
	if d, ok := As[Describer](p); ok {
		return d.Describe()
	}
	return Description{}
}

// WeightProducer is implemented by the providers that can make a weight
// triple (KindWeightTriple) inside the computation, for a mask party 1
// chooses there: the dealer-free provider with lattice encryption, where
// party 1's mask is its own input to the HE product anyway. With A = X1,
// party 1's own share of the product's operand, MatMulWeights sends no
// masked operand X1 − A (protocol.Session: the data owner's opening of its
// share of every product with the model owner's weights, 844 kB of its
// 922 kB a phase-1 candidate of sst2), and the item's outputs travel in the
// computation's own message instead of the provider's stream. A dealer
// picks A itself, so it cannot. protocol finds it with As (WeightsOnline)
// and rehearses a computation whose provider has it accordingly: those
// products then draw nothing, so a Script holds no weight triple.
type WeightProducer interface {
	// ProducesWeights reports whether the provider makes weight triples
	// this way (a provider type may only sometimes: the dealer-free
	// provider with vector OLE does not).
	ProducesWeights() bool
	// WeightProduct starts this party's half of the weight triple r
	// (KindWeightTriple; its Stream and Counter, set by the caller, name the
	// item in the session, each pair once, the same at both parties).
	// Party 0 registers what it must send party 1 for it before it
	// returns, so it must call WeightProduct before it waits for party 1's
	// message (WeightProduct.Words words).
	WeightProduct(ctx context.Context, r Request) (WeightProduct, error)
}

// WeightProduct is one party's half of a weight triple made inside the
// computation (WeightProducer): party 1 waits for what it needs from party
// 0 (Await), makes its message for the mask it chose (Outputs) and sends
// it; party 0 receives the message and checks it (Accept).
type WeightProduct interface {
	// Words is the size of party 1's message, public (the request's).
	Words() int
	// Watch returns ctx, also ended when the provider can no longer serve
	// the item (party 0: the service that sends party 1 what it waits
	// for failed, so the message will not come); call stop when done.
	Watch(ctx context.Context) (wctx context.Context, stop func())
	// Await is party 1's wait for what party 0 sends for the item (a wait
	// for the peer); it returns at once when nothing is missing.
	Await(ctx context.Context) error
	// Outputs is party 1's message for its mask a (M×K) and its share of
	// a·B (M×N, B party 0's mask of the weight).
	Outputs(ctx context.Context, a []uint64) (msg, c []uint64, err error)
	// Accept is party 0's check of party 1's message (Words words): its
	// share of a·B, or an error (wrapping ErrCorrelationCheck when the
	// message fails the check).
	Accept(msg []uint64) (c []uint64, err error)
}

// WeightsOnline returns p's WeightProducer when one in its chain (As)
// produces weight triples, else nil.
func WeightsOnline(p Provider) WeightProducer {
	if w, ok := As[WeightProducer](p); ok && w.ProducesWeights() {
		return w
	}
	return nil
}
