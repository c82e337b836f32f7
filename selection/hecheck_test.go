package selection

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/ot"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// heOutputsWord is the first word of the data owner's message of a
// -provider he item (beaver/ot/he.go): its tag, before the outputs.
const heOutputsWord uint64 = 0x4845_4f55_5450

// heRelay carries the OT providers' traffic between the model owner's
// provider and the data owner's (each on a pipe of its own), as a data owner
// whose provider alters what it sends would: it changes the first message
// of the data owner's on a beaver stream that pick selects (with a nil
// pick, an HE item's outputs message, as Generate sends it on the item's
// stream: the -provider he attack of issue 36, alterHE), and records on
// which stream and after how many untouched picked messages.
type heRelay struct {
	mu       sync.Mutex
	items    map[uint32]int // picked messages forwarded untouched, per beaver stream
	tampered bool
	stream   uint32 // the altered message's beaver stream
	before   int    // picked messages forwarded untouched on it before
	// pick selects the messages (of the data owner's, on beaver stream s)
	// the relay may alter, change alters one; nil: isHEOutputs, alterHE.
	pick   func(s uint32, b []byte) bool
	change func(b []byte)
}

// alterHE is the attack of issue 36 on an item's outputs message b.
func alterHE(b []byte) { alter(b[8:]) }

// isHEOutputs reports whether b is the data owner's message of an item.
func isHEOutputs(b []byte) bool {
	return len(b) > 8+18 && len(b)%8 == 0 && binary.LittleEndian.Uint64(b) == heOutputsWord && b[8] == 'O'
}

// alter applies the attack to an outputs message b: output 0's header
// (tag, version, m, width, MW, NW), then block 0's c0 (rows·cols values of
// 68 bits) and c1 (81 bits each).
func alter(b []byte) {
	u := func(i int) int { return int(binary.LittleEndian.Uint32(b[2+4*i:])) }
	m, width, mw, nw := u(0), u(1), u(2), u(3)
	bit := 8*18 + min(mw, m)*min(nw, width)*68 + 5*81 + 80 // bit 80 of c1[5]: + 2^80 mod 2^81
	b[bit/8] ^= 1 << (bit % 8)
}

// forward relays stream id from src to dst until either ends; fromDO marks
// the data owner's direction.
func (r *heRelay) forward(ctx context.Context, src, dst *transport.Conn, id uint32, fromDO bool) {
	for {
		b, err := src.Stream(id).RecvBytes(ctx, 1<<30)
		if err != nil {
			dst.Close()
			return
		}
		s := id - ot.DefaultStreamBase - 1
		pick, change := r.pick, r.change
		if pick == nil {
			pick, change = func(_ uint32, b []byte) bool { return isHEOutputs(b) }, alterHE
		}
		if fromDO && id != ot.DefaultStreamBase && pick(s, b) {
			r.mu.Lock()
			if !r.tampered {
				change(b)
				r.tampered, r.stream, r.before = true, s, r.items[s]
			} else {
				r.items[s]++
			}
			r.mu.Unlock()
		}
		if err := dst.Stream(id).SendBytes(ctx, b); err != nil {
			src.Close()
			return
		}
	}
}

// heCountProvider counts the weight-mask items (every item with all) its
// provider hands out, and the ones it refuses, per beaver stream.
type heCountProvider struct {
	*ot.Provider
	all     bool
	mu      sync.Mutex
	ok, bad map[uint32]int
	errs    []error
}

// Unwrap implements beaver.Wrapper.
func (h *heCountProvider) Unwrap() beaver.Provider { return h.Provider }

// WeightProduct counts the weight triples made inside the computation as
// Material counts the drawn ones: each accepted or refused.
func (p *heCountProvider) WeightProduct(ctx context.Context, r beaver.Request) (beaver.WeightProduct, error) {
	w, err := p.Provider.WeightProduct(ctx, r)
	if err != nil {
		return nil, err
	}
	return &countedProduct{WeightProduct: w, p: p, stream: r.Stream}, nil
}

type countedProduct struct {
	beaver.WeightProduct
	p      *heCountProvider
	stream uint32
}

func (c *countedProduct) Accept(msg []uint64) ([]uint64, error) {
	out, err := c.WeightProduct.Accept(msg)
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	if err == nil {
		c.p.ok[c.stream]++
	} else {
		c.p.bad[c.stream]++
		c.p.errs = append(c.p.errs, err)
	}
	return out, err
}

func (p *heCountProvider) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	m, err := p.Provider.Material(ctx, r)
	if p.all || r.Kind == beaver.KindWeightTriple || r.Kind == beaver.KindWeightVectorTriple {
		p.mu.Lock()
		if err == nil {
			p.ok[r.Stream]++
		} else {
			p.bad[r.Stream]++
			p.errs = append(p.errs, err)
		}
		p.mu.Unlock()
	}
	return m, err
}

// TestHECheckAbortsSelection: in a -provider he selection whose data owner
// adds δ·2^(LogQ1−64)·X^t (δ = 2^63) to the c1 of its first HE output
// (which on 69b02c1 moved the model owner's share by δ·s[pos−t] and so
// leaked its key through the comparisons), the model owner's check fails:
// its run ends with beaver.ErrCorrelationCheck, the data owner receives the
// public reason AbortCorrelation, and the model owner never held a share
// of the altered item — it accepted exactly the items before it on that
// stream and refused that one, so nothing derived from it was opened,
// compared or revealed (and no phase finished). The weight triples are
// made inside the computation (beaver.WeightProducer), so the outputs
// travel in the lanes' messages: the data owner's provider alters them as
// it makes them.
func TestHECheckAbortsSelection(t *testing.T) {
	f := newSecureFixture(t)
	mo, do := f.owners([2]string{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p0c, p1c := transport.Pipe(transport.Options{})
	t.Cleanup(func() { p0c.Close(); p1c.Close() })
	alt := &alteringProducer{items: map[uint32]int{}}
	var prov0 *heCountProvider
	var res [2]*Result
	errs := pair(t, [2]share.Seed{{5}, {6}}, func(_ context.Context, party int, c *transport.Conn, _ beaver.Provider) error {
		l, err := ot.NewLattice(ot.LatticeOptions{})
		if err != nil {
			return err
		}
		prov, err := ot.NewProvider([]*transport.Conn{p0c, p1c}[party], party, ot.ProviderOptions{WeightMasks: l})
		if err != nil {
			return err
		}
		if party == 0 {
			prov0 = &heCountProvider{Provider: prov, ok: map[uint32]int{}, bad: map[uint32]int{}}
			res[0], err = mo.Run(ctx, c, prov0)
		} else {
			alt.Provider = prov
			res[1], err = do.Run(ctx, c, alt)
		}
		return err
	})
	alt.mu.Lock()
	defer alt.mu.Unlock()
	checkAbort(t, alt.tampered, alt.stream, alt.before, errs, res, prov0, beaver.ErrCorrelationCheck)
}

// alteringProducer is a data owner's provider that makes its weight
// triples inside the computation as its own does, but alters the first
// outputs it makes (alterHE), recording on which stream and after how
// many untouched ones there.
type alteringProducer struct {
	*ot.Provider
	mu       sync.Mutex
	items    map[uint32]int
	tampered bool
	stream   uint32
	before   int
}

// Unwrap implements beaver.Wrapper.
func (p *alteringProducer) Unwrap() beaver.Provider { return p.Provider }

func (p *alteringProducer) WeightProduct(ctx context.Context, r beaver.Request) (beaver.WeightProduct, error) {
	w, err := p.Provider.WeightProduct(ctx, r)
	if err != nil {
		return nil, err
	}
	return &alteredProduct{WeightProduct: w, p: p, stream: r.Stream}, nil
}

type alteredProduct struct {
	beaver.WeightProduct
	p      *alteringProducer
	stream uint32
}

func (a *alteredProduct) Outputs(ctx context.Context, x []uint64) ([]uint64, []uint64, error) {
	msg, c, err := a.WeightProduct.Outputs(ctx, x)
	if err != nil {
		return msg, c, err
	}
	p := a.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tampered {
		p.items[a.stream]++
		return msg, c, nil
	}
	b := make([]byte, 8*len(msg))
	for i, w := range msg {
		binary.LittleEndian.PutUint64(b[8*i:], w)
	}
	alterHE(b)
	for i := range msg {
		msg[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	p.tampered, p.stream, p.before = true, a.stream, p.items[a.stream]
	return msg, c, nil
}

// checkAborted checks the end of a relayed selection whose data owner's
// message the relay altered (checkAbort).
func (r *heRelay) checkAborted(t *testing.T, errs [2]error, res [2]*Result, prov0 *heCountProvider, want error) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	checkAbort(t, r.tampered, r.stream, r.before, errs, res, prov0, want)
}

// checkAbort checks the end of a selection whose data owner altered a
// message (tampered: it did) on beaver stream after before untouched ones
// there: the model owner's run fails with want, the data owner receives
// the model owner's AbortCorrelation, the model owner handed out exactly
// the counted items before the altered one on its stream and refused that
// one, and no party returned a result.
func checkAbort(t *testing.T, tampered bool, stream uint32, before int, errs [2]error, res [2]*Result, prov0 *heCountProvider, want error) {
	t.Helper()
	if !tampered {
		t.Fatalf("no message was altered; errors %v", errs)
	}
	if !errors.Is(errs[0], want) || !errors.Is(errs[0], beaver.ErrCorrelationCheck) {
		t.Fatalf("model owner: %v, want %v", errs[0], want)
	}
	var pe *PeerAbortError
	if !errors.As(errs[1], &pe) || pe.Party != 0 || pe.Code != AbortCorrelation {
		t.Fatalf("data owner: %v, want the model owner's abort AbortCorrelation", errs[1])
	}
	prov0.mu.Lock()
	defer prov0.mu.Unlock()
	if got := prov0.ok[stream]; got != before || prov0.bad[stream] == 0 {
		t.Fatalf("stream %d: the model owner handed out %d counted items and refused %d; want the %d before the altered one, and a refusal",
			stream, got, prov0.bad[stream], before)
	}
	if res[0] != nil || res[1] != nil {
		t.Fatal("a party returned a result")
	}
	t.Logf("altered message %d of stream %d; model owner: %v; data owner: %v", before, stream, errs[0], errs[1])
}

// relayedSelection runs a selection of newSecureFixture whose parties' OT
// providers (options from opts) talk through relay, the model owner's
// provider counted (every item with all). It returns the parties' errors
// and results and the model owner's counting provider.
func relayedSelection(t *testing.T, relay *heRelay, all bool, opts func() (ot.ProviderOptions, error)) (errs [2]error, res [2]*Result, prov0 *heCountProvider) {
	t.Helper()
	f := newSecureFixture(t)
	mo, do := f.owners([2]string{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The providers' own pipes, joined by the relay.
	p0c, r0 := transport.Pipe(transport.Options{})
	r1, p1c := transport.Pipe(transport.Options{})
	for _, c := range []*transport.Conn{p0c, r0, r1, p1c} {
		t.Cleanup(func() { c.Close() })
	}
	for id := ot.DefaultStreamBase - 2; id < ot.DefaultStreamBase+130; id++ { // the silent OTs' two streams too
		go relay.forward(ctx, r0, r1, id, false)
		go relay.forward(ctx, r1, r0, id, true)
	}
	errs = pair(t, [2]share.Seed{{5}, {6}}, func(ctx context.Context, party int, c *transport.Conn, _ beaver.Provider) error {
		conn := []*transport.Conn{p0c, p1c}[party]
		o, err := opts()
		if err != nil {
			return err
		}
		prov, err := ot.NewProvider(conn, party, o)
		if err != nil {
			return err
		}
		if party == 0 {
			prov0 = &heCountProvider{Provider: prov, all: all, ok: map[uint32]int{}, bad: map[uint32]int{}}
			res[0], err = mo.Run(ctx, c, prov0)
		} else {
			res[1], err = do.Run(ctx, c, prov)
		}
		return err
	})
	return errs, res, prov0
}
