package beaver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/selectformer/selectformer/share"
)

// dealerCore computes the dealer's correction words from the two seeds and
// checks every request: valid sizes, counters never reused on a stream, and
// one shape per weight id.
type dealerCore struct {
	seeds [2]share.Seed
	keys  [2]*keyCache

	mu      sync.Mutex
	next    map[uint32]uint64 // next unused counter of each stream
	weights map[uint64][2]int // k, n of each weight id seen

	items, words atomic.Int64
}

func newDealerCore(seed0, seed1 share.Seed) *dealerCore {
	return &dealerCore{
		seeds:   [2]share.Seed{seed0, seed1},
		keys:    [2]*keyCache{newKeyCache(seed0, 0), newKeyCache(seed1, 1)},
		next:    make(map[uint32]uint64),
		weights: make(map[uint64][2]int),
	}
}

// serve checks r and returns party 1's correction words.
func (d *dealerCore) serve(r Request) ([]uint64, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	if next := d.next[r.Stream]; r.Counter < next {
		d.mu.Unlock()
		return nil, fmt.Errorf("beaver: dealer: %v reuses a counter (stream %d is at %d)", r, r.Stream, next)
	}
	if r.Kind == KindWeightTriple || r.Kind == KindWeightVectorTriple {
		k := r.K
		if r.Kind == KindWeightVectorTriple {
			k = 1
		}
		shape := [2]int{k, r.N}
		if old, ok := d.weights[r.WeightID]; ok && old != shape {
			d.mu.Unlock()
			return nil, fmt.Errorf("beaver: dealer: %v: weight %d was %d×%d, now %d×%d", r, r.WeightID, old[0], old[1], shape[0], shape[1])
		} else if !ok {
			if len(d.weights) >= maxCachedKeys {
				d.mu.Unlock()
				return nil, fmt.Errorf("beaver: dealer: %v: more than %d weight ids", r, maxCachedKeys)
			}
			d.weights[r.WeightID] = shape
		}
	}
	d.next[r.Stream] = r.Counter + 1
	d.mu.Unlock()

	p0 := expandLocal(d.keys[0], r)
	p1 := expandLocal(d.keys[1], r)
	var mask []uint64
	switch r.Kind {
	case KindWeightTriple:
		mask = weightMask(d.seeds[0], r.WeightID, r.K, r.N)
	case KindWeightVectorTriple:
		mask = weightMask(d.seeds[0], r.WeightID, 1, r.N)
	}
	out, err := correction(r, p0, p1, mask)
	if err != nil {
		return nil, err
	}
	d.items.Add(1)
	d.words.Add(int64(len(out)))
	return out, nil
}

// Dealer is the in-process dealer: it holds both parties' seeds and hands each
// party a Provider. Party 0's provider expands all its material locally;
// party 1's provider expands its masks locally and takes only the correction
// words from the dealer, by a function call instead of a network message (its
// DealerStats count the bytes those words would have cost on a wire). Used by
// tests, the quickstart and benchmarks where all parties share a process.
type Dealer struct {
	core     *dealerCore
	insecure bool
}

// NewDealer returns an in-process dealer with fresh random seeds.
func NewDealer() (*Dealer, error) {
	s0, err := share.NewSeed()
	if err != nil {
		return nil, fmt.Errorf("beaver: new dealer: %w", err)
	}
	s1, err := share.NewSeed()
	if err != nil {
		return nil, fmt.Errorf("beaver: new dealer: %w", err)
	}
	return NewDealerWithSeeds(s0, s1), nil
}

// NewDealerWithSeeds returns an in-process dealer with the given seeds (seed0
// for party 0, seed1 for party 1): reproducible material for tests, the same
// as a networked Server with the same seeds.
func NewDealerWithSeeds(seed0, seed1 share.Seed) *Dealer {
	return &Dealer{core: newDealerCore(seed0, seed1)}
}

// NewInsecureModelOwnerDealer returns a dealer run by the model owner itself,
// INSECURE and for benchmarking only: it mirrors CrypTen's "trusted first
// party" mode, in which party 0 makes all correlated randomness, so party 0
// knows party 1's masks and could unmask everything party 1 sends. Its cost
// profile is that of NewDealer; never use it with real data.
func NewInsecureModelOwnerDealer(seed share.Seed) *Dealer {
	return &Dealer{core: newDealerCore(seed.Derive("insecure-p0-dealer/0"), seed.Derive("insecure-p0-dealer/1")), insecure: true}
}

// Insecure reports whether the dealer is the insecure model-owner dealer.
func (d *Dealer) Insecure() bool { return d.insecure }

// Provider returns a new Provider for party (0 or 1). Each call returns a
// fresh provider whose streams start at counter 0; a party should use one.
func (d *Dealer) Provider(party int) (Provider, error) {
	switch party {
	case 0:
		return newSeededProvider(0, d.core.seeds[0], nil), nil
	case 1:
		return newSeededProvider(1, d.core.seeds[1], inProcess{d.core}), nil
	}
	return nil, fmt.Errorf("beaver: provider for party %d, want 0 or 1", party)
}

// Stats returns the items the dealer served and the bytes of correction words
// they amount to.
func (d *Dealer) Stats() DealerStats {
	return DealerStats{BytesRecv: 8 * d.core.words.Load(), Items: d.core.items.Load()}
}

// inProcess hands party 1 the dealer's corrections by a function call.
type inProcess struct{ d *dealerCore }

func (s inProcess) correct(ctx context.Context, r Request) ([]uint64, int64, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, 0, err
	}
	c, err := s.d.serve(r)
	if err != nil {
		return nil, 0, 0, err
	}
	return c, requestSize, 8 * int64(len(c)), nil
}
