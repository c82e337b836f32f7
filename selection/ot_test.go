package selection

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/selectformer/selectformer/beaver/ot"
	"github.com/selectformer/selectformer/testharness/sessiontest"
	"github.com/selectformer/selectformer/testharness/twoparty"
)

// TestSecureSelectionDealerFree runs the real pipeline twice from the same
// coin (the second run starts from the first's state files, progress
// removed): once with the in-process dealer, once with no dealer at all, the
// parties generating every correlation by OT over their own connection
// (ot.Provider), with both of its weight-mask generators: vector OLE
// (ot.VectorOLE) or lattice encryption (ot.Lattice). The bootstrap follows
// from the coin and must be identical;
// the survivors of every phase must be the dealer run's, except for
// candidates whose plaintext entropies lie within the secure forward's
// fixed-point error of the boundary (probabilistic truncation makes each
// product's last bit depend on the correlated randomness, which differs
// between the modes). Both runs must also match the plaintext pipeline.
func TestSecureSelectionDealerFree(t *testing.T) {
	if testing.Short() {
		t.Skip("two secure selections")
	}
	f := newSecureFixture(t)
	refDirs := [2]string{filepath.Join(t.TempDir(), "mo"), filepath.Join(t.TempDir(), "do")}
	mo, do := f.owners(refDirs)
	ref, errs := f.run(t, mo, do, 0)
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	checkPlain(t, mo.Proxies, f.pool, f.p, ref[0])
	checkProxyDelivery(t, do, ref[0], mo.Proxies, f.target.Config)
	proxies := mo.Proxies

	for _, mode := range []struct {
		name    string
		lattice bool // the weight masks by an ot.Lattice, else by vector OLE
	}{{"ot", false}, {"he", true}} {
		t.Run(mode.name, func(t *testing.T) {
			dirs := [2]string{filepath.Join(t.TempDir(), "mo"), filepath.Join(t.TempDir(), "do")}
			for p := range 2 {
				b, err := os.ReadFile(StateFile(refDirs[p], p))
				if err != nil {
					t.Fatal(err)
				}
				s, err := DecodeState(b)
				if err != nil {
					t.Fatal(err)
				}
				s.BootstrapDone, s.Bootstrap, s.Phases = false, nil, nil
				if b, err = json.Marshal(s); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(dirs[p], 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(StateFile(dirs[p], p), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			mo, do = f.owners(dirs)
			var res [2]*Result
			var ots [2]*ot.Provider
			r, _ := twoparty.Run(context.Background(), twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) (struct{}, error) {
				var opts ot.ProviderOptions
				if mode.lattice {
					l, err := ot.NewLattice(ot.LatticeOptions{})
					if err != nil {
						return struct{}{}, err
					}
					opts.WeightMasks = l
				}
				prov, err := ot.NewProvider(p.Conn, p.ID, opts)
				if err != nil {
					return struct{}{}, err
				}
				ots[p.ID] = prov
				if p.ID == 0 {
					res[0], err = mo.Run(ctx, p.Conn, prov)
				} else {
					res[1], err = do.Run(ctx, p.Conn, prov)
				}
				return struct{}{}, err
			})
			if r.Err[0] != nil || r.Err[1] != nil {
				t.Fatal(r.Err)
			}
			if !slices.Equal(res[0].Selected, res[1].Selected) {
				t.Fatal("parties disagree")
			}
			if !slices.Equal(res[0].Bootstrap, ref[0].Bootstrap) {
				t.Fatalf("bootstrap %v, dealer run %v", res[0].Bootstrap, ref[0].Bootstrap)
			}
			checkPlain(t, mo.Proxies, f.pool, f.p, res[0])
			checkProxyDelivery(t, do, res[0], mo.Proxies, f.target.Config)
			for p, prov := range ots {
				s := prov.Stats()
				if s.Items == 0 || s.BytesSent == 0 {
					t.Fatalf("party %d drew nothing from the OT provider: %+v", p, s)
				}
				t.Logf("party %d: OT traffic %+v, %+v", p, s, prov.OTStats())
				l, ok := prov.WeightMasks().(*ot.Lattice)
				if ok != mode.lattice {
					t.Fatalf("party %d: weight masks %T", p, prov.WeightMasks())
				}
				if !ok {
					continue
				}
				st := l.Stats()
				t.Logf("party %d: HE %+v", p, st)
				if st.Items == 0 {
					t.Fatalf("party %d: no weight-mask item made with HE", p)
				}
				// Every phase's encrypted weights were dropped once its
				// forward was done (beaver.WeightReleaser).
				if p == 1 && (st.Held != 0 || st.Released != st.Uploads) {
					t.Fatalf("party 1 holds %d encrypted weights after the run, released %d of %d", st.Held, st.Released, st.Uploads)
				}
			}

			// The two runs, phase by phase, on the dealer run's proxies'
			// (plaintext) entropies.
			swaps, err := sessiontest.PhaseNearTies(candidates(f.p.PoolSize, ref[0].Bootstrap), ref[0].Survivors, res[0].Survivors,
				sessiontest.ProxyScores(proxies, f.pool), sessiontest.SecureScoreTol)
			if err != nil {
				t.Errorf("dealer and %v modes: %v", mode.name, err)
			}
			exact := !slices.ContainsFunc(swaps, func(n int) bool { return n > 0 })
			t.Logf("dealer and %v modes differ on %v near-ties by phase", mode.name, swaps)
			t.Logf("dealer-free selection equals the dealer's exactly: %v", exact)
		})
	}
}
