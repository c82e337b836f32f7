package source

import (
	"context"

	"github.com/selectformer/selectformer/beaver/ot"
)

// The dealer-free sources: the parties make every correlation themselves
// by oblivious transfer over their own connection (beaver/ot), the
// weight-mask correlations by vector OLE ("ot") or by lattice encryption
// ("he", ot.Lattice: each weight matrix uploaded once per session).
func init() {
	Register(Source{
		Name:       "ot",
		Doc:        "no dealer: the parties make it by oblivious transfer over their own connection",
		DealerFree: true,
		Open:       openOT(false, func() (ot.WeightMaskGenerator, error) { return ot.VectorOLE{}, nil }),
	})
	Register(Source{
		Name:       "he",
		Doc:        "no dealer: as ot, but the products with the model owner's weights by lattice encryption, each weight matrix uploaded once",
		DealerFree: true,
		Open:       openOT(false, compactLattice),
	})
	Register(Source{
		Name:       "he-silent",
		Doc:        "no dealer: as he, with the OTs by Ferret silent OT: about half the bytes on the parties' link, for more CPU and memory",
		DealerFree: true,
		Open:       openOT(true, compactLattice),
	})
}

// compactLattice is the he sources' weight-mask generator. Compact: party 1
// keeps half the memory (issue 38's 4 GB a party) for a fifth more of its
// HE work.
func compactLattice() (ot.WeightMaskGenerator, error) {
	return ot.NewLattice(ot.LatticeOptions{Compact: true})
}

// openOT returns the Open of an ot.Provider on the peer connection whose
// weight masks come from masks (a fresh generator per provider), with
// silent OTs when silent (ot.ProviderOptions.SilentOT).
func openOT(silent bool, masks func() (ot.WeightMaskGenerator, error)) func(context.Context, Env) (Opened, error) {
	return func(ctx context.Context, env Env) (Opened, error) {
		conn, err := env.Peer(ctx)
		if err != nil {
			return Opened{}, err
		}
		m, err := masks()
		if err == nil {
			var prov *ot.Provider
			if prov, err = ot.NewProvider(conn, env.Party, ot.ProviderOptions{WeightMasks: m, SilentOT: silent}); err == nil {
				return Opened{Provider: prov, Conn: conn, Closer: nopCloser{}}, nil
			}
		}
		conn.Close()
		return Opened{}, err
	}
}
