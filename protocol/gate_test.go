package protocol

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
)

// TestComputeGateReleasedWhileWaiting runs two sessions of party 0 under a
// gate of one slot while party 1 answers them in the opposite order: the
// session holding the slot waits for its peer, who first needs the other
// session's message, which that session can send only once it has the
// slot. Unless a wait for the peer gives the slot back, the run deadlocks.
func TestComputeGateReleasedWhileWaiting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	gate := NewComputeGate(1)
	_, err := twoparty.Run(ctx, twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) ([2]uint64, error) {
		var ss [2]*Session
		for i := range ss {
			s, err := NewSession(ctx, p.ID, p.Conn.Stream(uint32(10+i)), p.Provider, share.DefaultFixedPoint)
			if err != nil {
				return [2]uint64{}, err
			}
			ss[i] = s
		}
		reveal := func(s *Session, v uint64) (uint64, error) {
			x := &share.Tensor{Shape: []int{1}, Data: []uint64{v}}
			out, err := s.Reveal(ctx, x)
			if err != nil {
				return 0, err
			}
			return out.Data[0], nil
		}
		var got [2]uint64
		if p.ID == 1 { // answers session 1, then session 0
			for _, i := range []int{1, 0} {
				v, err := reveal(ss[i], uint64(100+i))
				if err != nil {
					return got, err
				}
				got[i] = v
			}
			return got, nil
		}
		// Party 0: session 0 takes the only slot first, then session 1
		// asks for it.
		if err := ss[0].Enter(ctx, gate, 0); err != nil {
			return got, err
		}
		errc := make(chan error, 1)
		go func() {
			if err := ss[1].Enter(ctx, gate, 1); err != nil {
				errc <- err
				return
			}
			defer ss[1].Leave()
			v, err := reveal(ss[1], 1)
			got[1] = v
			errc <- err
		}()
		v, err := reveal(ss[0], 0)
		got[0] = v
		// Leave before waiting for the other session: a slot held across
		// a wait for anything but the peer can starve the other holder.
		ss[0].Leave()
		return got, errors.Join(err, <-errc)
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
}

func TestComputeGateMisuse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	gate := NewComputeGate(1)
	if gate.Slots() != 1 || NewComputeGate(0).Slots() != 1 {
		t.Fatalf("slots %d and %d, want 1", gate.Slots(), NewComputeGate(0).Slots())
	}
	_, err := twoparty.Run(ctx, twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) (struct{}, error) {
		s, err := NewSession(ctx, p.ID, p.Conn.Stream(3), p.Provider, share.DefaultFixedPoint)
		if err != nil {
			return struct{}{}, err
		}
		if p.ID == 1 {
			return struct{}{}, nil
		}
		if err := s.Enter(ctx, nil, 4); err == nil || !strings.Contains(err.Error(), "nil") {
			t.Errorf("Enter with no gate: %v", err)
		}
		if err := s.Enter(ctx, gate, 4); err != nil {
			return struct{}{}, err
		}
		if err := s.Enter(ctx, gate, 4); err == nil || !strings.Contains(err.Error(), "twice") {
			t.Errorf("second Enter: %v", err)
		}
		s.Leave()
		// The slot is free again: a short wait succeeds.
		short, c2 := context.WithTimeout(ctx, time.Second)
		defer c2()
		if err := s.Enter(short, gate, 0); err != nil {
			t.Errorf("Enter after Leave: %v", err)
		}
		s.Leave()
		// A full gate: Enter gives up with the context.
		if err := gate.g.Acquire(ctx, 0, nil); err != nil {
			return struct{}{}, err
		}
		short2, c3 := context.WithTimeout(ctx, 20*time.Millisecond)
		defer c3()
		if err := s.Enter(short2, gate, 0); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Enter on a full gate: %v", err)
		}
		s.Leave() // holds nothing: must not release the other holder's slot
		if n := gate.g.Waiting(); n != 0 {
			t.Errorf("%d waiters left", n)
		}
		gate.g.Release()
		return struct{}{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// ExampleComputeGate runs two batches of party 0 under a gate of one slot:
// while the batch that holds the slot waits for its peer, the other one
// computes; the oldest batch (priority 0) gets a freed slot first.
func ExampleComputeGate() {
	ctx := context.Background()
	gate := NewComputeGate(1) // one slot: one batch computes at a time
	r, err := twoparty.Run(ctx, twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) ([2]uint64, error) {
		var out [2]uint64
		errc := make(chan error, 2)
		for b := range 2 {
			go func() {
				s, err := NewSession(ctx, p.ID, p.Conn.Stream(uint32(10+b)), p.Provider, share.DefaultFixedPoint)
				if err != nil {
					errc <- err
					return
				}
				if p.ID == 0 { // the model owner's batches share its gate
					if err := s.Enter(ctx, gate, int64(b)); err != nil {
						errc <- err
						return
					}
					defer s.Leave()
				}
				x := &share.Tensor{Shape: []int{1}, Data: []uint64{uint64(p.ID*100 + b)}}
				v, err := s.Reveal(ctx, x) // the slot is given back during the exchange
				if err == nil {
					out[b] = v.Data[0]
				}
				errc <- err
			}()
		}
		return out, errors.Join(<-errc, <-errc)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Out[0], r.Out[1])
	// Output: [100 102] [100 102]
}

// blockingProvider's Material blocks until release is closed.
type blockingProvider struct {
	beaver.Provider
	release <-chan struct{}
}

func (b *blockingProvider) Unwrap() beaver.Provider { return b.Provider }

func (b *blockingProvider) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	select {
	case <-b.release:
	case <-ctx.Done():
		return beaver.Material{}, ctx.Err()
	}
	return b.Provider.Material(ctx, r)
}

// TestComputeGateReleasedWhileDrawing runs two sessions of party 0 under a
// gate of one slot: session 0 holds the slot and draws material that is not
// at hand, which comes only once session 1 has computed (as a dealer-free
// item comes once the peer's half of it is drawn, which may wait for a slot
// of the peer's gate held by sessions waiting on this party's). Unless a
// draw that waits gives the slot back, the run deadlocks (on d5bf317 it
// did). Material at hand (a drawn Prefetch) keeps the slot: the other
// session does not get it in between.
func TestComputeGateReleasedWhileDrawing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	gate := NewComputeGate(1)
	_, err := twoparty.Run(ctx, twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) (struct{}, error) {
		computed := make(chan struct{})
		// Session 0's first item, drawn ahead (at hand); its other items,
		// here on stream 99, come once session 1 has computed.
		sc := Script{Requests: []beaver.Request{{Kind: beaver.KindTriple, N: 1}}}
		pf := NewPrefetch(sc, 10)
		var ss [2]*Session
		for i := range ss {
			prov := beaver.Provider(p.Provider)
			if i == 0 {
				prov = pf.Wrap(&blockingProvider{Provider: p.Provider, release: computed})
			}
			s, err := NewSession(ctx, p.ID, p.Conn.Stream(uint32(10+i)), prov, share.DefaultFixedPoint)
			if err != nil {
				return struct{}{}, err
			}
			ss[i] = s
		}
		if p.ID == 1 {
			return struct{}{}, nil // party 1 draws nothing
		}
		if err := pf.Draw(ctx, p.Provider); err != nil {
			return struct{}{}, err
		}
		if err := ss[0].Enter(ctx, gate, 0); err != nil {
			return struct{}{}, err
		}
		var entered atomic.Bool
		errc := make(chan error, 1)
		go func() {
			if err := ss[1].Enter(ctx, gate, 1); err != nil {
				errc <- err
				return
			}
			entered.Store(true)
			close(computed) // session 1 computed: session 0's item comes
			ss[1].Leave()
			errc <- nil
		}()
		for gate.g.Waiting() == 0 {
			time.Sleep(time.Millisecond)
		}
		if _, err := ss[0].Provider().Triples(ctx, 10, 1); err != nil {
			return struct{}{}, err
		}
		if entered.Load() {
			t.Error("session 1 took the slot while session 0 took material at hand")
		}
		if _, err := ss[0].Provider().Triples(ctx, 99, 1); err != nil {
			return struct{}{}, err
		}
		ss[0].Leave()
		return struct{}{}, <-errc
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
}
