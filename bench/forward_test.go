package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// TestForward measures small networks of every shape, proxy and exact: every
// cost is positive, and a proxy's rounds are exactly its blocks' (BlockCost)
// plus the mask and head; bad configurations are rejected.
func TestForward(t *testing.T) {
	for _, c := range []ForwardConfig{
		{Shape: "bert-base", Layers: 2, Heads: 1, MLPHidden: 2, Seq: 6, Batch: 2},
		{Shape: "distilbert", Layers: 1, Heads: 2, MLPHidden: 2, Seq: 5, Batch: 1, Options: secure.Options{PublicMask: true}},
		{Shape: "vit-small", Layers: 1, Heads: 1, MLPHidden: 2, Seq: 5, Batch: 3},
		{Shape: "vit-base", Layers: 1, Heads: 1, MLPHidden: 2, Seq: 4, Batch: 1, Options: secure.Options{FullLastLayer: true}},
		{Shape: "bert-base", Layers: 1, Heads: 1, Seq: 4, Batch: 1, Exact: true},
		{Shape: "vit-small", Layers: 1, Heads: 1, Seq: 4, Batch: 1, Exact: true, Options: secure.Options{PrivateEmbeddings: true}},
	} {
		r, err := Forward(context.Background(), c)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if r.Rounds <= 0 || r.BytesP0 <= 0 || r.BytesP1 <= 0 || r.DealerBytes <= 0 || r.Seconds <= 0 || r.PrepareRounds <= 0 || r.Shape != c.Shape || r.Batch != c.Batch {
			t.Errorf("%+v: result %+v", c, r)
		}
		// The per-kind count accounts for every dealer byte, and each party
		// holds at least the dealer words it receives.
		var dealer int64
		for _, u := range r.Correlations {
			dealer += 8 * (u.DealerWords[0] + u.DealerWords[1])
			if u.Items <= 0 || u.PartWords[0] < u.DealerWords[0] || u.PartWords[1] < u.DealerWords[1] {
				t.Errorf("%s: kind use %+v", c.Shape, u)
			}
		}
		if dealer != r.DealerBytes {
			t.Errorf("%s: kinds account for %d dealer bytes, the dealer sent %d", c.Shape, dealer, r.DealerBytes)
		}
		if c.Exact {
			continue
		}
		// A proxy forward's rounds: its blocks (BlockCost), the mask's
		// round (private mask, text: the fill term; the folded blocks need
		// no m⊗b) and the head (HeadCost; ViT: final
		// LayerNorm 15 (mean 1, squared deviation and its truncation 2, MLP
		// 1 + 7 + 2, the product with r·γ and its truncation 2); text: pooler
		// 1 + ReLU with its truncation 7; then the classifier folded into the
		// entropy MLP, 1 + 7 + 2: every truncation before a ReLU fused into
		// it, protocol.TruncReLU).
		a, err := ShapeArch(c)
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := secure.HeadCost(a, c.Batch)
		if err != nil {
			t.Fatal(err)
		}
		head := int64(18)
		if a.Family == model.ViT {
			head = 25
		}
		if want != head {
			t.Errorf("%s: head %d rounds, want %d", c.Shape, want, head)
		}
		if a.Family != model.ViT && !c.Options.PublicMask {
			want++
		}
		for l := range a.Layers {
			r, _, err := secure.BlockCost(a, c.Batch, l, c.Options)
			if err != nil {
				t.Fatal(err)
			}
			want += r
		}
		if r.Rounds != want {
			t.Errorf("%s: %d rounds, want %d", c.Shape, r.Rounds, want)
		}
	}
	for _, c := range []ForwardConfig{
		{Shape: "gpt", Layers: 1, MLPHidden: 2, Batch: 1},
		{Shape: "vit-small", Layers: 1, Heads: 7, MLPHidden: 2, Batch: 1},
		{Shape: "bert-base", Layers: 1, MLPHidden: 2, Batch: 0},
		{Shape: "bert-base", Layers: 0, MLPHidden: 2, Batch: 1},
		{Shape: "bert-base", Layers: 1, MLPHidden: 0, Batch: 1},
	} {
		if _, err := Forward(context.Background(), c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// TestRunForwardPartyMatchesForward checks that the per-party entry point
// measures what Forward measures: both parties run RunForwardParty on their
// own sessions and NewForwardResult gives Forward's rounds and bytes.
func TestRunForwardPartyMatchesForward(t *testing.T) {
	cfg := ForwardConfig{Shape: "distilbert", Layers: 1, Heads: 1, MLPHidden: 2, Seq: 5, Batch: 2, Seed: 3}
	want, err := Forward(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := RunLocal(context.Background(), LocalConfig{}, func(ctx context.Context, s *protocol.Session) (*ForwardParty, error) {
		return RunForwardParty(ctx, s, cfg)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := NewForwardResult(cfg, [2]ForwardParty{*r.Out[0], *r.Out[1]})
	if err != nil {
		t.Fatal(err)
	}
	if got.Rounds != want.Rounds || got.BytesP0 != want.BytesP0 || got.BytesP1 != want.BytesP1 || got.DealerBytes != want.DealerBytes ||
		got.PrepareRounds != want.PrepareRounds || got.PrepareBytesP0 != want.PrepareBytesP0 {
		t.Errorf("per party %+v, Forward %+v", got, want)
	}
	if want.PeakBytes == 0 {
		t.Error("Forward measured no peak heap")
	}
}

// TestRunLocal checks RunLocal's costs and failure handling: a Reveal of n
// elements costs each party one round and one message of n words (session
// setup excluded), the heap is sampled only when asked, and a failing party
// cancels the other with its own error reported first.
func TestRunLocal(t *testing.T) {
	const n = 100
	for _, cfg := range []LocalConfig{
		{},
		{MeasureMemory: true, Seeds: [2]share.Seed{{1}, {2}}, Stream: 7, FixedPoint: share.FixedPoint{FracBits: 12, IntBits: 20}},
		{Link: &transport.Profile{Name: "test", Latency: 5 * time.Millisecond}},
	} {
		r, err := RunLocal(context.Background(), cfg, func(ctx context.Context, s *protocol.Session) (uint32, error) {
			x, err := s.ShareInput(0, nil, n)
			if s.Party() == 0 {
				x, err = s.ShareInput(0, &share.Tensor{Shape: []int{n}, Data: make([]uint64, n)})
			}
			if err != nil {
				return 0, err
			}
			m := NewMeter(s)
			if _, err := s.Reveal(ctx, x); err != nil {
				return 0, err
			}
			if c := m.Since(); c.Stream.Rounds != 1 {
				return 0, errors.New("reveal: not one round")
			}
			return s.Stream().ID(), nil
		})
		if err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		wantStream := cfg.Stream
		if wantStream == 0 {
			wantStream = 1
		}
		for p := range 2 {
			if c := r.Cost[p].Stream; c.Rounds != 1 || c.BytesSent != 8*n+10 || r.Out[p] != wantStream {
				t.Errorf("%+v: party %d cost %+v on stream %d, want 1 round, %d bytes on stream %d", cfg, p, c, r.Out[p], 8*n+10, wantStream)
			}
		}
		if (r.PeakHeap > 0) != cfg.MeasureMemory || r.Seconds <= 0 {
			t.Errorf("%+v: peak heap %d, seconds %v", cfg, r.PeakHeap, r.Seconds)
		}
	}
	boom := errors.New("boom")
	_, err := RunLocal(context.Background(), LocalConfig{}, func(ctx context.Context, s *protocol.Session) (int, error) {
		if s.Party() == 1 {
			return 0, boom
		}
		_, err := s.Reveal(ctx, &share.Tensor{Shape: []int{1}, Data: []uint64{0}}) // party 1 never answers
		return 0, err
	})
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "bench: run local: party 1: boom") {
		t.Errorf("error %q", err)
	}
}
