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
