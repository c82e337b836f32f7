package beaver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/selectformer/selectformer/share"
)

// corrector supplies party 1 with the dealer's correction words of a request.
type corrector interface {
	// correct returns r.CorrectionWords() words and the dealer traffic
	// (request bytes sent, bytes received) it cost.
	correct(ctx context.Context, r Request) (corr []uint64, sent, recv int64, err error)
}

// seededProvider is a Provider for one party whose material is expanded from
// the seed the dealer shared with it; party 1's corrections come from src.
type seededProvider struct {
	party int
	keys  *keyCache
	src   corrector // nil for party 0

	mu  sync.Mutex
	pos map[uint32]uint64

	bytesRecv, bytesSent, items atomic.Int64
}

var _ Provider = (*seededProvider)(nil)

func newSeededProvider(party int, seed share.Seed, src corrector) *seededProvider {
	return &seededProvider{party: party, keys: newKeyCache(seed, party), src: src, pos: make(map[uint32]uint64)}
}

// Party implements Provider.
func (p *seededProvider) Party() int { return p.party }

// next validates r, assigns it the stream's next counter and returns this
// party's material.
func (p *seededProvider) next(ctx context.Context, r Request) (material, error) {
	if err := r.Validate(); err != nil {
		return material{}, err
	}
	if err := ctx.Err(); err != nil {
		return material{}, fmt.Errorf("beaver: %v: %w", r.Kind, err)
	}
	p.mu.Lock()
	r.Counter = p.pos[r.Stream]
	p.pos[r.Stream] = r.Counter + 1
	p.mu.Unlock()
	local := expandLocal(p.keys, r)
	var corr []uint64
	if p.party == 1 {
		c, sent, recv, err := p.src.correct(ctx, r)
		p.bytesSent.Add(sent)
		p.bytesRecv.Add(recv)
		if err != nil {
			return material{}, fmt.Errorf("beaver: %v: %w", r, err)
		}
		if len(c) != r.CorrectionWords() {
			return material{}, fmt.Errorf("beaver: %v: dealer sent %d words, want %d", r, len(c), r.CorrectionWords())
		}
		corr = c
	}
	p.items.Add(1)
	return assemble(p.party, r, local, corr), nil
}

// Triples implements Provider.
func (p *seededProvider) Triples(ctx context.Context, stream uint32, n int) (Triple, error) {
	m, err := p.next(ctx, Request{Kind: KindTriple, Stream: stream, N: n})
	if err != nil {
		return Triple{}, err
	}
	return m.triple(), nil
}

// SquarePairs implements Provider.
func (p *seededProvider) SquarePairs(ctx context.Context, stream uint32, n int) (SquarePair, error) {
	m, err := p.next(ctx, Request{Kind: KindSquare, Stream: stream, N: n})
	if err != nil {
		return SquarePair{}, err
	}
	return m.square(), nil
}

// MatTriples implements Provider.
func (p *seededProvider) MatTriples(ctx context.Context, stream uint32, batch, m, k, n int) (Triple, error) {
	mat, err := p.next(ctx, Request{Kind: KindMatTriple, Stream: stream, Batch: batch, M: m, K: k, N: n})
	if err != nil {
		return Triple{}, err
	}
	return mat.triple(), nil
}

// WeightMask implements Provider.
func (p *seededProvider) WeightMask(ctx context.Context, weightID uint64, k, n int) ([]uint64, error) {
	if p.party != 0 {
		return nil, fmt.Errorf("beaver: weight mask %d asked by party %d: only the model owner (party 0) holds weight masks", weightID, p.party)
	}
	if _, err := prod(k, n); err != nil {
		return nil, fmt.Errorf("beaver: weight mask %d (%d×%d): %w", weightID, k, n, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("beaver: weight mask %d: %w", weightID, err)
	}
	return weightMask(p.keys.seed, weightID, k, n), nil
}

// WeightTriple implements Provider.
func (p *seededProvider) WeightTriple(ctx context.Context, stream uint32, weightID uint64, m, k, n int) (WeightTriple, error) {
	mat, err := p.next(ctx, Request{Kind: KindWeightTriple, Stream: stream, WeightID: weightID, M: m, K: k, N: n})
	if err != nil {
		return WeightTriple{}, err
	}
	return mat.weightTriple(), nil
}

// WeightVectorTriple implements Provider.
func (p *seededProvider) WeightVectorTriple(ctx context.Context, stream uint32, weightID uint64, m, n int) (WeightTriple, error) {
	mat, err := p.next(ctx, Request{Kind: KindWeightVectorTriple, Stream: stream, WeightID: weightID, M: m, N: n})
	if err != nil {
		return WeightTriple{}, err
	}
	return mat.weightTriple(), nil
}

// ANDTriples implements Provider.
func (p *seededProvider) ANDTriples(ctx context.Context, stream uint32, words int) (BitTriple, error) {
	m, err := p.next(ctx, Request{Kind: KindAND, Stream: stream, N: words})
	if err != nil {
		return BitTriple{}, err
	}
	return m.bitTriple(), nil
}

// CrossANDTriples implements Provider.
func (p *seededProvider) CrossANDTriples(ctx context.Context, stream uint32, words int) (BitTriple, error) {
	m, err := p.next(ctx, Request{Kind: KindCrossAND, Stream: stream, N: words})
	if err != nil {
		return BitTriple{}, err
	}
	return m.bitTriple(), nil
}

// TruncPairs implements Provider.
func (p *seededProvider) TruncPairs(ctx context.Context, stream uint32, n int, fracBits uint) (TruncPair, error) {
	m, err := p.next(ctx, Request{Kind: KindTrunc, Stream: stream, N: n, FracBits: fracBits})
	if err != nil {
		return TruncPair{}, err
	}
	return m.truncPair(), nil
}

// BitPairs implements Provider.
func (p *seededProvider) BitPairs(ctx context.Context, stream uint32, n int) (BitPair, error) {
	m, err := p.next(ctx, Request{Kind: KindBitPair, Stream: stream, N: n})
	if err != nil {
		return BitPair{}, err
	}
	return m.bitPair(), nil
}

// Position implements Provider.
func (p *seededProvider) Position(stream uint32) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pos[stream]
}

// Seek moves stream's counter to pos. Moving backwards would hand out
// material already used, so it is an error.
func (p *seededProvider) Seek(stream uint32, pos uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur := p.pos[stream]; pos < cur {
		return fmt.Errorf("beaver: seek stream %d back from %d to %d would reuse correlated randomness", stream, cur, pos)
	}
	p.pos[stream] = pos
	return nil
}

// Stats implements Provider.
func (p *seededProvider) Stats() DealerStats {
	return DealerStats{BytesRecv: p.bytesRecv.Load(), BytesSent: p.bytesSent.Load(), Items: p.items.Load()}
}

// fetch asks any Provider for the material of r (r.Counter is ignored: the
// provider assigns the stream's next counter).
func fetch(ctx context.Context, p Provider, r Request) (material, error) {
	switch r.Kind {
	case KindTriple:
		t, err := p.Triples(ctx, r.Stream, r.N)
		return material{r.Kind, [][]uint64{t.A, t.B, t.C}}, err
	case KindSquare:
		t, err := p.SquarePairs(ctx, r.Stream, r.N)
		return material{r.Kind, [][]uint64{t.A, t.A2}}, err
	case KindMatTriple:
		t, err := p.MatTriples(ctx, r.Stream, r.Batch, r.M, r.K, r.N)
		return material{r.Kind, [][]uint64{t.A, t.B, t.C}}, err
	case KindWeightTriple:
		t, err := p.WeightTriple(ctx, r.Stream, r.WeightID, r.M, r.K, r.N)
		return material{r.Kind, [][]uint64{t.A, t.C}}, err
	case KindWeightVectorTriple:
		t, err := p.WeightVectorTriple(ctx, r.Stream, r.WeightID, r.M, r.N)
		return material{r.Kind, [][]uint64{t.A, t.C}}, err
	case KindAND:
		t, err := p.ANDTriples(ctx, r.Stream, r.N)
		return material{r.Kind, [][]uint64{t.A, t.B, t.C}}, err
	case KindCrossAND:
		t, err := p.CrossANDTriples(ctx, r.Stream, r.N)
		return material{r.Kind, [][]uint64{t.A, t.B, t.C}}, err
	case KindTrunc:
		t, err := p.TruncPairs(ctx, r.Stream, r.N, r.FracBits)
		return material{r.Kind, [][]uint64{t.R, t.MSB, t.LowShifted}}, err
	case KindBitPair:
		t, err := p.BitPairs(ctx, r.Stream, r.N)
		return material{r.Kind, [][]uint64{t.Packed, t.Arith, t.A, t.AR}}, err
	}
	return material{}, fmt.Errorf("beaver: fetch of unknown kind %v", r.Kind)
}
