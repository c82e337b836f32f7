package main

// forward --provider ot|he: the secure forward with no dealer.

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/ot"
	"github.com/selectformer/selectformer/beaver/source"
	"github.com/selectformer/selectformer/bench"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
	"github.com/selectformer/selectformer/transport"
)

// kindCost is one party's provider work for one kind in one run.
type kindCost struct {
	items              int64
	bytesSent, bytesRx int64
	seconds            float64
	// onlineWords are the words of the kind's items made inside the
	// forward (weight triples with a Lattice), carried in its messages.
	onlineWords int64
	// extWords are the words of bytesSent that were OT extension (the
	// SoftSpokenOT matrix and check this party sent as receiver): what a
	// silent OT would remove (bench/TWOHOSTS.md step 18).
	extWords int64
}

// timedProvider wraps a dealer-free provider and charges each Material
// call's traffic (the provider's Stats before and after) and wall time to
// the request's kind. The forward of one session draws on one stream, one
// request at a time, so the deltas do not overlap; runForwardFree checks
// that the kinds add up to the provider's total.
type timedProvider struct {
	beaver.Provider
	mu   sync.Mutex
	cost map[string]*kindCost
	// ots reads the OT provider's counters (nil: none to read).
	ots func() ot.Stats
	// open counts the weight triples in progress inside the forward, mark
	// is the provider's traffic when their bytes were last charged.
	open int
	mark beaver.DealerStats
}

// Unwrap implements beaver.Wrapper.
func (t *timedProvider) Unwrap() beaver.Provider { return t.Provider }

func (t *timedProvider) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	before, extBefore := t.Provider.Stats(), t.extWords()
	t0 := time.Now()
	m, err := t.Provider.Material(ctx, r)
	d := time.Since(t0)
	after, extAfter := t.Provider.Stats(), t.extWords()
	t.mu.Lock()
	c := t.cost[r.Kind.String()]
	if c == nil {
		c = &kindCost{}
		t.cost[r.Kind.String()] = c
	}
	c.items++
	c.bytesSent += after.BytesSent - before.BytesSent
	c.bytesRx += after.BytesRecv - before.BytesRecv
	c.extWords += extAfter - extBefore
	c.seconds += d.Seconds()
	t.mu.Unlock()
	return m, err
}

// extWords returns the OT extension words this party has sent so far.
func (t *timedProvider) extWords() int64 {
	if t.ots == nil {
		return 0
	}
	return t.ots().ExtensionWords
}

// ProducesWeights implements beaver.WeightProducer as the wrapped
// provider does: the Session then makes its weight triples through t.
func (t *timedProvider) ProducesWeights() bool { return beaver.WeightsOnline(t.Provider) != nil }

// WeightProduct implements beaver.WeightProducer: it charges a weight triple
// made inside the forward to its kind as Material charges a drawn one (the
// provider's traffic from the item's start to its end: the uploads it
// waited for, and its time), and counts apart the outputs it carries in the
// forward's own message (online).
func (t *timedProvider) WeightProduct(ctx context.Context, r beaver.Request) (beaver.WeightProduct, error) {
	wp := beaver.WeightsOnline(t.Provider)
	if wp == nil {
		return nil, fmt.Errorf("%v: the provider makes no weight triple inside the computation", r)
	}
	t.mu.Lock()
	if t.open == 0 {
		t.mark = t.Provider.Stats()
	}
	t.open++
	t.mu.Unlock()
	w, err := wp.WeightProduct(ctx, r)
	if err != nil {
		t.mu.Lock()
		t.open--
		t.mu.Unlock()
		return nil, err
	}
	return &timedProduct{WeightProduct: w, t: t, kind: r.Kind.String()}, nil
}

// timedProduct is a weight triple made inside the forward, timed.
type timedProduct struct {
	beaver.WeightProduct
	t    *timedProvider
	kind string
}

func (p *timedProduct) Outputs(ctx context.Context, a []uint64) ([]uint64, []uint64, error) {
	t0 := time.Now()
	msg, c, err := p.WeightProduct.Outputs(ctx, a)
	p.charge(len(msg), time.Since(t0))
	return msg, c, err
}

func (p *timedProduct) Accept(msg []uint64) ([]uint64, error) {
	t0 := time.Now()
	c, err := p.WeightProduct.Accept(msg)
	p.charge(len(msg), time.Since(t0))
	return c, err
}

// charge adds to the item's kind the provider's traffic since the last
// charge of an item in progress (the products of one MatMulWeightsMany are
// in progress together, so each byte is charged once), the item's own work
// d (party 1's product, party 0's check: not the waits), and its message of
// words words to the online outputs.
func (p *timedProduct) charge(words int, d time.Duration) {
	t := p.t
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.Provider.Stats()
	c := t.cost[p.kind]
	if c == nil {
		c = &kindCost{}
		t.cost[p.kind] = c
	}
	c.items++
	c.bytesSent += now.BytesSent - t.mark.BytesSent
	c.bytesRx += now.BytesRecv - t.mark.BytesRecv
	c.seconds += d.Seconds()
	c.onlineWords += int64(words)
	t.mark = now
	t.open--
}

// take returns the costs so far and resets them.
func (t *timedProvider) take() map[string]*kindCost {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.cost
	t.cost = map[string]*kindCost{}
	return c
}

// freeRun is one party's observations of the dealer-free forward.
type freeRun struct {
	setup    beaver.DealerStats
	setupSec float64
	runs     [2]freeForward
	he       *ot.HEStats // the Lattice's uploads (nil: no lattice weight masks)
}

type freeForward struct {
	fwd    bench.ForwardParty
	total  beaver.DealerStats // the provider's traffic during the run
	kinds  map[string]*kindCost
	silent ot.SilentStats // the silent OTs of the run (an ot.Provider's)
}

// silentOf returns the silent-OT counters of prov (zero for another kind).
func silentOf(prov beaver.Provider) ot.SilentStats {
	if o, ok := beaver.As[*ot.Provider](prov); ok {
		return o.SilentStats()
	}
	return ot.SilentStats{}
}

// sub returns a − b field by field.
func subSilent(a, b ot.SilentStats) ot.SilentStats {
	return ot.SilentStats{Received: a.Received - b.Received, Sent: a.Sent - b.Sent, Iterations: a.Iterations - b.Iterations,
		WordsSent: a.WordsSent - b.WordsSent, WordsRecv: a.WordsRecv - b.WordsRecv}
}

// steadySent returns what party a sent in the run with its silent-OT
// iterations charged at their steady cost per COT (ot.SilentSteadyBytes) instead of what they
// cost in the run (no iteration, one, or warm-up ones of the setup set):
// a sends as receiver of the COTs it took as receiver and as sender of
// those the peer took.
func steadySent(a freeForward, party int) (float64, bool) {
	if a.silent == (ot.SilentStats{}) {
		return 0, false
	}
	rb, sb := ot.SilentSteadyBytes(party)
	return float64(a.total.BytesSent-8*a.silent.WordsSent) + rb*float64(a.silent.Received) + sb*float64(a.silent.Sent), true
}

// runForwardFree runs the forward of cfg twice in one session between two
// in-process parties whose correlations come from the dealer-free source
// src on their own pipe (an ot.Provider: "he" makes its weight masks with
// an ot.Lattice), and prints, per run, the online cost and the provider's
// traffic each way and time per kind. The first run includes the one-time
// uploads of encrypted weights (a Lattice's); the second, on the same
// weight ids, is the steady state of every later candidate.
func runForwardFree(ctx context.Context, cfg bench.ForwardConfig, src source.Source, stdout io.Writer) error {
	provider := src.Name
	sid, err := beaver.NewSessionID()
	if err != nil {
		return err
	}
	r, err := twoparty.Run(ctx, twoparty.Config{Transport: transport.Options{Link: cfg.Link}}, func(ctx context.Context, p *twoparty.Party) (freeRun, error) {
		var out freeRun
		opened, err := src.Open(ctx, source.InProcess(p.ID, p.Conn, nil))
		if err != nil {
			return out, err
		}
		otp := opened.Provider
		t0 := time.Now()
		if err := otp.BindSession(ctx, sid); err != nil {
			return out, err
		}
		out.setupSec = time.Since(t0).Seconds()
		out.setup = otp.Stats()
		tp := &timedProvider{Provider: otp, cost: map[string]*kindCost{}}
		if o, ok := beaver.As[*ot.Provider](otp); ok {
			tp.ots = o.OTStats
		}
		s, err := protocol.NewSession(ctx, p.ID, p.Conn.Stream(1), tp, share.DefaultFixedPoint)
		if err != nil {
			return out, err
		}
		for i := range out.runs {
			before, silentBefore := otp.Stats(), silentOf(otp)
			f, err := bench.RunForwardParty(ctx, s, cfg)
			if err != nil {
				return out, fmt.Errorf("run %d: %w", i+1, err)
			}
			after := otp.Stats()
			out.runs[i] = freeForward{fwd: *f, kinds: tp.take(), silent: subSilent(silentOf(otp), silentBefore),
				total: beaver.DealerStats{BytesSent: after.BytesSent - before.BytesSent, BytesRecv: after.BytesRecv - before.BytesRecv, Items: after.Items - before.Items}}
		}
		if o, ok := beaver.As[*ot.Provider](otp); ok {
			if l, ok := o.WeightMasks().(*ot.Lattice); ok {
				st := l.Stats()
				out.he = &st
			}
		}
		return out, nil
	})
	if err != nil {
		return fmt.Errorf("forward --provider %s: %w", provider, err)
	}
	p0, p1 := r.Out[0], r.Out[1]
	fmt.Fprintf(stdout, "%s L=%d W=%d d=%d seq=%d batch=%d, --provider %s, one session, two forward runs on the same weights\n",
		cfg.Shape, cfg.Layers, cfg.Heads, cfg.MLPHidden, cfg.Seq, cfg.Batch, provider)
	fmt.Fprintf(stdout, "setup (base OTs%s): p0 sent %d, p1 sent %d bytes, %.2f s\n", map[bool]string{true: ", HE public key"}[p0.he != nil], p0.setup.BytesSent, p1.setup.BytesSent, max(p0.setupSec, p1.setupSec))
	if p0.he != nil {
		fmt.Fprintf(stdout, "HE: %d encrypted weight matrices (B, B·V or [B | B·V]) and %d of projection rows uploaded (%d bytes), %d weight-mask items\n",
			p0.he.Uploads, p0.he.Projections, p0.he.UploadBytes, p0.he.Items)
	}
	for i := range p0.runs {
		a, b := p0.runs[i], p1.runs[i]
		fmt.Fprintf(stdout, "\nrun %d (%s): online %d rounds, p0 sent %d, p1 sent %d bytes; %.2f s in all; provider traffic p0→p1 %d, p1→p0 %d bytes\n",
			i+1, map[bool]string{true: "first candidate: one-time uploads included", false: "later candidates: steady state"}[i == 0],
			a.fwd.Forward.Stream.Rounds, a.fwd.Forward.Stream.BytesSent, b.fwd.Forward.Stream.BytesSent, max(a.fwd.Seconds, b.fwd.Seconds),
			a.total.BytesSent, b.total.BytesSent)
		fmt.Fprintln(stdout, "| kind | items | bytes p0→p1 | bytes p1→p0 | of which OT extension p0→p1 | p1→p0 | seconds p0 | seconds p1 |")
		fmt.Fprintln(stdout, "|---|---:|---:|---:|---:|---:|---:|---:|")
		var names []string
		for k := range a.kinds {
			names = append(names, k)
		}
		slices.Sort(names)
		var s0, s1, e0, e1 int64
		for _, k := range names {
			x, y := a.kinds[k], b.kinds[k]
			if y == nil {
				y = &kindCost{}
			}
			s0 += x.bytesSent
			s1 += y.bytesSent
			e0 += 8 * x.extWords
			e1 += 8 * y.extWords
			fmt.Fprintf(stdout, "| %s | %d | %d | %d | %d | %d | %.2f | %.2f |\n", k, x.items, x.bytesSent, y.bytesSent, 8*x.extWords, 8*y.extWords, x.seconds, y.seconds)
		}
		fmt.Fprintf(stdout, "| total | | %d | %d | %d | %d | | |\n", s0, s1, e0, e1)
		for _, k := range names {
			if w := a.kinds[k].onlineWords; w > 0 {
				fmt.Fprintf(stdout, "(%s: made inside the forward, the data owner's share of each operand its mask: its outputs, %d bytes p1→p0, are in the online messages, which carry no masked operand)\n", k, 8*w)
			}
		}
		if s0 != a.total.BytesSent || s1 != b.total.BytesSent {
			fmt.Fprintf(stdout, "(the kinds' bytes %d/%d differ from the provider's total %d/%d: draws overlapped)\n", s0, s1, a.total.BytesSent, b.total.BytesSent)
		}
		if sa, ok := steadySent(a, 0); ok {
			sb, _ := steadySent(b, 1)
			fmt.Fprintf(stdout, "silent OTs: p0 took %d as receiver, p1 %d; %d Ferret iterations in the run (p0 sent %d, p1 %d bytes in them); "+
				"with every COT at its direction's steady cost the provider traffic is p0→p1 %.0f, p1→p0 %.0f bytes (steady state)\n",
				a.silent.Received, b.silent.Received, a.silent.Iterations, 8*a.silent.WordsSent, 8*b.silent.WordsSent, sa, sb)
		}
	}
	return nil
}
