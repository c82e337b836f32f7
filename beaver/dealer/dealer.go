package dealer

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
)

// Dealer is the in-process dealer: it holds both parties' seeds and hands each
// party a Provider. Each party's provider expands its masks locally and
// takes only its dealer words from the dealer (those of the kinds dealt to
// it, beaver.Correlation.DealtTo), by a function call
// instead of a network message (its DealerStats count the bytes those words
// would have cost on a wire). Used by
// tests, the quickstart and benchmarks where all parties share a process.
//
// Material is keyed by session like the networked dealer's: a provider bound
// with BindSession (as selection does, with the id both parties drew) gets
// that session's material once the other party's provider has presented the
// same id; a provider used without binding gets the dealer's default session
// (the zero id), shared by all such providers of this Dealer. Within a
// session the dealer refuses any counter of a party already served.
type Dealer struct {
	core *dealerCore
}

// New returns an in-process dealer with fresh random seeds.
func New() (*Dealer, error) {
	s0, err := share.NewSeed()
	if err != nil {
		return nil, fmt.Errorf("beaver: new dealer: %w", err)
	}
	s1, err := share.NewSeed()
	if err != nil {
		return nil, fmt.Errorf("beaver: new dealer: %w", err)
	}
	return NewWithSeeds(s0, s1), nil
}

// NewWithSeeds returns an in-process dealer with the given seeds (seed0
// for party 0, seed1 for party 1): reproducible material for tests, the same
// as a networked Server with the same seeds for the same session id.
func NewWithSeeds(seed0, seed1 share.Seed) *Dealer {
	return &Dealer{core: newDealerCore(seed0, seed1)}
}

// Provider returns a new Provider for party (0 or 1). Each call returns a
// fresh provider whose streams start at counter 0; a party should use one.
func (d *Dealer) Provider(party int) (beaver.Provider, error) {
	if party != 0 && party != 1 {
		return nil, fmt.Errorf("beaver: provider for party %d, want 0 or 1", party)
	}
	core := d.core
	src := func(s *coreSession) corrector { return inProcess{core, s, party} }
	bind := func(ctx context.Context, id beaver.SessionID) (share.Seed, corrector, error) {
		s, err := core.join(ctx, nil, id, party, "", 0, DefaultSessionTimeout)
		if err != nil {
			return share.Seed{}, nil, err
		}
		return s.seeds[party], src(s), nil
	}
	auto := func() (beaver.SessionID, share.Seed, corrector) {
		s := core.defaultSession()
		return s.id, s.seeds[party], src(s)
	}
	return newSeededProvider(party, bind, auto), nil
}

// Stats returns the items the dealer served and the bytes of correction words
// they amount to.
func (d *Dealer) Stats() beaver.DealerStats {
	return beaver.DealerStats{BytesRecv: 8 * d.core.words.Load(), Items: d.core.items.Load()}
}

// inProcess hands party its dealer words of session s by a function call.
type inProcess struct {
	d     *dealerCore
	s     *coreSession
	party int
}

func (c inProcess) correct(ctx context.Context, r beaver.Request) ([]uint64, int64, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, 0, err
	}
	out, err := c.d.serve(c.s, c.party, r)
	if err != nil {
		return nil, 0, 0, err
	}
	return out, beaver.RequestSize, 8 * int64(len(out)), nil
}
