package beaver

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
