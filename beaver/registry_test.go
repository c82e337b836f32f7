package beaver_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/beaver/ot"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/beavertest"
	"github.com/selectformer/selectformer/transport"
)

// providerKinds are the three ways a party gets material, each making a
// bound pair of providers (party 0, party 1) for session id.
var providerKinds = []struct {
	name string
	pair func(t *testing.T, id beaver.SessionID) [2]beaver.Provider
}{
	{"dealer", dealerPair},
	{"networked dealer", func(t *testing.T, id beaver.SessionID) [2]beaver.Provider {
		return networkedPair(t, id)
	}},
	{"ot", otPair},
}

func testSeeds() (share.Seed, share.Seed) {
	var s0, s1 share.Seed
	s0[0], s1[0] = 1, 2
	return s0, s1
}

// dealerPair returns the providers of an in-process dealer.
func dealerPair(t *testing.T, id beaver.SessionID) [2]beaver.Provider {
	d := dealer.NewWithSeeds(testSeeds())
	var ps [2]beaver.Provider
	for p := range 2 {
		var err error
		if ps[p], err = d.Provider(p); err != nil {
			t.Fatal(err)
		}
	}
	beavertest.BindBoth(t, ps, id)
	return ps
}

// networkedPair returns the clients of a networked dealer served over
// in-memory connections.
func networkedPair(t *testing.T, id beaver.SessionID) [2]beaver.Provider {
	s0, s1 := testSeeds()
	srv, err := dealer.NewServerWithSeeds(s0, s1, dealer.ServerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ps [2]beaver.Provider
	for p := range 2 {
		cs, cc := transport.Pipe(transport.Options{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cs.Close()
			_ = srv.Serve(ctx, cs, p)
		}()
		t.Cleanup(func() { cc.Close() })
		c, err := dealer.Connect(ctx, cc, p)
		if err != nil {
			t.Fatal(err)
		}
		ps[p] = c
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	beavertest.BindBoth(t, ps, id)
	return ps
}

// otPair returns the dealer-free providers of beaver/ot over one in-memory
// connection.
func otPair(t *testing.T, id beaver.SessionID) [2]beaver.Provider {
	c0, c1 := transport.Pipe(transport.Options{})
	t.Cleanup(func() { c0.Close(); c1.Close() })
	var ps [2]beaver.Provider
	for p, c := range []*transport.Conn{c0, c1} {
		var err error
		if ps[p], err = ot.NewProvider(c, p, ot.ProviderOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	beavertest.BindBoth(t, ps, id)
	return ps
}

// checkItem draws r from both providers and checks that the material
// satisfies the kind's correlation (Correlation.Verify), with party 0's
// weight mask for a kind that has one.
func checkItem(t *testing.T, ps [2]beaver.Provider, r beaver.Request) {
	t.Helper()
	c, ok := beaver.Lookup(r.Kind)
	if !ok {
		t.Fatalf("%v is not registered", r.Kind)
	}
	ms, err := beavertest.DrawBoth(context.Background(), ps, r)
	if err != nil {
		t.Fatalf("%v: %v", r, err)
	}
	var mask []uint64
	if c.Mask != nil {
		k, n := c.Mask(r)
		if mask, err = (beaver.Typed{Provider: ps[0]}).WeightMask(context.Background(), r.WeightID, k, n); err != nil {
			t.Fatalf("%v: weight mask: %v", r, err)
		}
	}
	if err := c.Verify(r, mask, ms[0].Parts, ms[1].Parts); err != nil {
		t.Fatal(err)
	}
}

// TestEveryKindEveryProvider walks every registered kind (the toy kind of
// toykind_test.go included) through the in-process dealer, the networked
// dealer and the OT provider: both parties' material of its Sample, twice on
// two streams, satisfies the correlation.
func TestEveryKindEveryProvider(t *testing.T) {
	kinds := beaver.Kinds()
	if len(kinds) < 12 {
		t.Fatalf("registered kinds %v: want the 10 built-in ones and the 2 toys", kinds)
	}
	for _, pk := range providerKinds {
		t.Run(pk.name, func(t *testing.T) {
			ps := pk.pair(t, beaver.SessionID{7})
			for _, k := range kinds {
				if k == kindNoOT && pk.name == "ot" {
					continue // registered without a generator on purpose (TestUnknownKinds)
				}
				c, _ := beaver.Lookup(k)
				for stream := range uint32(2) {
					r := c.Sample
					r.Stream = stream
					for range 2 {
						checkItem(t, ps, r)
					}
				}
			}
		})
	}
}

// TestRegisterIncomplete: a descriptor that is incomplete, or whose kind or
// name is taken, fails to register (a panic at init), and leaves the
// registry as it was; so do OT generators of unknown or taken kinds.
func TestRegisterIncomplete(t *testing.T) {
	const free beaver.Kind = 250
	good := toyCorrelation()
	good.Kind, good.Name, good.Sample.Kind = free, "free", free
	cases := map[string]func(c *beaver.Correlation){
		"kind 0":               func(c *beaver.Correlation) { c.Kind, c.Sample.Kind = 0, 0 },
		"no name":              func(c *beaver.Correlation) { c.Name = "" },
		"no Dims":              func(c *beaver.Correlation) { c.Dims = nil },
		"no Format":            func(c *beaver.Correlation) { c.Format = nil },
		"no Local":             func(c *beaver.Correlation) { c.Local = nil },
		"no Parts":             func(c *beaver.Correlation) { c.Parts = nil },
		"no Dealt":             func(c *beaver.Correlation) { c.Dealt = nil },
		"no Deal":              func(c *beaver.Correlation) { c.Deal = nil },
		"no Assemble":          func(c *beaver.Correlation) { c.Assemble = nil },
		"no Verify":            func(c *beaver.Correlation) { c.Verify = nil },
		"no dealer words":      func(c *beaver.Correlation) { c.DealtTo = [2]bool{} },
		"sample of a kind":     func(c *beaver.Correlation) { c.Sample.Kind = beaver.KindTriple },
		"invalid sample":       func(c *beaver.Correlation) { c.Sample.M = 3 },
		"taken kind":           func(c *beaver.Correlation) { c.Kind, c.Sample.Kind = beaver.KindTriple, beaver.KindTriple },
		"taken name":           func(c *beaver.Correlation) { c.Name = "triple" },
		"toy's name":           func(c *beaver.Correlation) { c.Name = toyName },
		"oversized sample":     func(c *beaver.Correlation) { c.Sample.N = beaver.MaxItemWords + 1 },
		"negative-size sample": func(c *beaver.Correlation) { c.Sample.N = -1 },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			c := good
			mutate(&c)
			if !panics(func() { beaver.Register(c) }) {
				t.Fatal("registered")
			}
			if _, ok := beaver.Lookup(free); ok {
				t.Fatal("a refused descriptor left an entry")
			}
		})
	}
	if got, _ := beaver.Lookup(beaver.KindTriple); got.Name != "triple" {
		t.Fatalf("triple's descriptor changed: %q", got.Name)
	}
	gen := func(context.Context, *ot.Gen, ot.Item) ([][]uint64, error) { return nil, nil }
	for name, f := range map[string]func(){
		"ot: nil generator":  func() { ot.Register(kindNoOT, nil) },
		"ot: unknown kind":   func() { ot.Register(free, gen) },
		"ot: taken kind":     func() { ot.Register(beaver.KindTriple, gen) },
		"ot: toy taken kind": func() { ot.Register(kindToy, gen) },
	} {
		if !panics(f) {
			t.Errorf("%s: registered", name)
		}
	}
}

func panics(f func()) (p bool) {
	defer func() { p = recover() != nil }()
	f()
	return false
}

// TestUnknownKinds: a request of an unregistered kind is refused by every
// provider, and the OT provider refuses a registered kind without a
// generator, naming it.
func TestUnknownKinds(t *testing.T) {
	for _, pk := range providerKinds {
		t.Run(pk.name, func(t *testing.T) {
			ps := pk.pair(t, beaver.SessionID{8})
			_, err := beavertest.DrawBoth(context.Background(), ps, beaver.Request{Kind: 251, N: 1})
			if err == nil || !strings.Contains(err.Error(), "unknown kind") {
				t.Fatalf("unregistered kind: %v", err)
			}
			_, err = beavertest.DrawBoth(context.Background(), ps, beaver.Request{Kind: kindNoOT, N: 2})
			if pk.name == "ot" {
				if err == nil || !strings.Contains(err.Error(), "toynoot has no OT generator") {
					t.Fatalf("kind without a generator: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v", err)
			}
		})
	}
}
