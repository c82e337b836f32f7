package source_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/ot"
	"github.com/selectformer/selectformer/beaver/source"
	"github.com/selectformer/selectformer/testharness/twoparty"
	"github.com/selectformer/selectformer/transport"
)

// TestBuiltIn: the four built-in sources, in order, with what the
// binaries rely on (the default, which are dealer-free, the choices of an
// error message).
func TestBuiltIn(t *testing.T) {
	if got := source.Names(); !slices.Equal(got, []string{"dealer", "ot", "he", "he-silent"}) {
		t.Fatalf("names %v", got)
	}
	if got := source.Choices(); got != "dealer, ot, he or he-silent" {
		t.Fatalf("choices %q", got)
	}
	// The flags' help lists every source with its Doc, in order.
	usage, at := source.Usage(), 0
	for _, n := range source.Names() {
		s, _ := source.ByName(n)
		i := strings.Index(usage[at:], n+" ("+s.Doc+")")
		if i < 0 {
			t.Fatalf("usage %q: no %s with its doc after byte %d", usage, n, at)
		}
		at += i + len(n)
	}
	for _, c := range []struct {
		name string
		free bool
	}{{source.Default, false}, {"dealer", false}, {"ot", true}, {"he", true}, {"he-silent", true}} {
		s, ok := source.ByName(c.name)
		if !ok || s.Name != c.name || s.DealerFree != c.free || s.Open == nil || s.Doc == "" || source.DealerFree(c.name) != c.free {
			t.Errorf("%s: %+v, %v", c.name, s, ok)
		}
	}
	if s, ok := source.ByName("tee"); ok || s.Open != nil || source.DealerFree("tee") {
		t.Error("an unknown name found")
	}
}

// TestRegisterRefuses: a name taken, empty or not a flag value, or a
// source without Open, is a programming error.
func TestRegisterRefuses(t *testing.T) {
	open := func(context.Context, source.Env) (source.Opened, error) { return source.Opened{}, nil }
	for name, s := range map[string]source.Source{
		"taken":   {Name: "ot", Open: open},
		"empty":   {Open: open},
		"comma":   {Name: "a,b", Open: open},
		"no open": {Name: "fresh"},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("registered")
				}
			}()
			source.Register(s)
		})
	}
	if _, ok := source.ByName("fresh"); ok {
		t.Error("a refused source is registered")
	}
}

// TestOpenEverySource opens each built-in source for both parties of an
// in-process run (source.InProcess: the run's pipe and in-process dealer),
// binds the providers to one session and draws a triple that
// reconstructs: the dealer source hands out the dealer's provider, the
// dealer-free ones an ot.Provider on the pipe (with the lattice weight
// masks for he and he-silent, and the silent OTs for he-silent).
func TestOpenEverySource(t *testing.T) {
	for _, name := range []string{"dealer", "ot", "he", "he-silent"} {
		t.Run(name, func(t *testing.T) {
			src, _ := source.ByName(name)
			id := beaver.SessionID{byte(len(name))}
			r, err := twoparty.Run(context.Background(), twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) (beaver.Triple, error) {
				op, err := src.Open(ctx, source.InProcess(p.ID, p.Conn, p.Provider))
				if err != nil {
					return beaver.Triple{}, err
				}
				if op.Conn != p.Conn || op.Closer == nil {
					return beaver.Triple{}, errors.New("the opened source lost the connection or its closer")
				}
				defer op.Closer.Close()
				otp, isOT := beaver.As[*ot.Provider](op.Provider)
				if isOT != src.DealerFree {
					return beaver.Triple{}, errors.New("a dealer-free source without an ot.Provider, or the other way round")
				}
				if isOT {
					lat, lattice := otp.WeightMasks().(*ot.Lattice)
					if lattice != strings.HasPrefix(name, "he") {
						return beaver.Triple{}, errors.New("the weight masks of the wrong generator")
					}
					// Party 1 keeps its encrypted weights compact: half the
					// memory (issue 38: 4 GB a party at sst2's defaults).
					if lattice && !lat.Compact() {
						return beaver.Triple{}, errors.New("the he source's party 1 keeps its encrypted weights expanded")
					}
				}
				if err := op.Provider.BindSession(ctx, id); err != nil {
					return beaver.Triple{}, err
				}
				tr, err := beaver.Typed{Provider: op.Provider}.Triples(ctx, 3, 4)
				if isOT {
					if st := otp.SilentStats(); (st.Received > 0) != (name == "he-silent") {
						return beaver.Triple{}, fmt.Errorf("silent OTs taken as receiver: %d", st.Received)
					}
				}
				return tr, err
			})
			if err != nil {
				t.Fatal(err)
			}
			t0, t1 := r.Out[0], r.Out[1]
			for i := range 4 {
				if (t0.A[i]+t1.A[i])*(t0.B[i]+t1.B[i]) != t0.C[i]+t1.C[i] {
					t.Fatalf("triple %d does not reconstruct", i)
				}
			}
		})
	}
}

// closer records a Close.
type closer struct{ closed bool }

func (c *closer) Close() error { c.closed = true; return nil }

// TestDealerSourceOrder: the dealer source connects to the dealer before
// the peer (a dealer that refuses ends the party before it waits for its
// peer), closes the dealer's connection when the peer cannot be reached,
// and refuses to open without a dealer.
func TestDealerSourceOrder(t *testing.T) {
	ctx := context.Background()
	src, _ := source.ByName("dealer")
	var calls []string
	dc := &closer{}
	refused := errors.New("dealer refused")
	env := source.Env{
		Party: 1,
		Peer: func(context.Context) (*transport.Conn, error) {
			calls = append(calls, "peer")
			return nil, errors.New("no peer")
		},
		Dealer: func(context.Context) (beaver.Provider, io.Closer, error) {
			calls = append(calls, "dealer")
			return nil, dc, nil
		},
	}
	if _, err := src.Open(ctx, env); err == nil || !slices.Equal(calls, []string{"dealer", "peer"}) || !dc.closed {
		t.Fatalf("open: %v after %v, dealer connection closed %v", err, calls, dc.closed)
	}
	calls = nil
	env.Dealer = func(context.Context) (beaver.Provider, io.Closer, error) {
		calls = append(calls, "dealer")
		return nil, nil, refused
	}
	if _, err := src.Open(ctx, env); !errors.Is(err, refused) || !slices.Equal(calls, []string{"dealer"}) {
		t.Fatalf("refused by the dealer: %v after %v (the peer must not be awaited)", err, calls)
	}
	env.Dealer = nil
	if _, err := src.Open(ctx, env); err == nil || !strings.Contains(err.Error(), "no dealer") {
		t.Fatalf("no dealer: %v", err)
	}
}
