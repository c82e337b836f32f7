package secure

import (
	"context"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy/model"
)

func TestBench(t *testing.T) {
	for _, c := range []BenchConfig{
		{Shape: "bert-base", Layers: 2, Heads: 1, MLPDim: 2, Seq: 6, Batch: 2},
		{Shape: "distilbert", Layers: 1, Heads: 2, MLPDim: 2, Seq: 5, Batch: 1, Options: Options{PublicMask: true}},
		{Shape: "vit-small", Layers: 1, Heads: 1, MLPDim: 2, Seq: 5, Batch: 3},
		{Shape: "vit-base", Layers: 1, Heads: 1, MLPDim: 2, Seq: 4, Batch: 1, Options: Options{FullLastLayer: true}},
		{Shape: "bert-base", Layers: 1, Heads: 1, Seq: 4, Batch: 1, Exact: true},
		{Shape: "vit-small", Layers: 1, Heads: 1, Seq: 4, Batch: 1, Exact: true, Options: Options{PrivateEmbeddings: true}},
	} {
		r, err := Bench(context.Background(), c)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if r.Rounds <= 0 || r.BytesP0 <= 0 || r.BytesP1 <= 0 || r.DealerBytes <= 0 || r.Seconds <= 0 || r.PrepareRounds <= 0 || r.Shape != c.Shape || r.Batch != c.Batch {
			t.Errorf("%+v: result %+v", c, r)
		}
		if c.Exact {
			continue
		}
		// A proxy forward's rounds: its blocks (BlockCost), the mask's two
		// rounds (private mask, text) and the head (ViT: final LayerNorm MLP
		// 16 + classifier 2; text: pooler 2 + ReLU 7 + classifier 2; entropy
		// MLP 11).
		a, err := ShapeArch(c)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(2 + 11)
		if a.Family == model.ViT {
			want += 16
		} else {
			want += 9
			if !c.Options.PublicMask {
				want += 2
			}
		}
		for l := range a.Layers {
			r, _, err := BlockCost(a, c.Batch, l, c.Options)
			if err != nil {
				t.Fatal(err)
			}
			want += r
		}
		if r.Rounds != want {
			t.Errorf("%s: %d rounds, want %d", c.Shape, r.Rounds, want)
		}
	}
	for _, c := range []BenchConfig{
		{Shape: "gpt", Layers: 1, MLPDim: 2, Batch: 1},
		{Shape: "vit-small", Layers: 1, Heads: 7, MLPDim: 2, Batch: 1},
		{Shape: "bert-base", Layers: 1, MLPDim: 2, Batch: 0},
		{Shape: "bert-base", Layers: 0, MLPDim: 2, Batch: 1},
		{Shape: "bert-base", Layers: 1, MLPDim: 0, Batch: 1},
	} {
		if _, err := Bench(context.Background(), c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// TestForwardBadInputs checks that bad inputs end both parties with errors,
// not panics.
func TestForwardBadInputs(t *testing.T) {
	a := Arch{Family: model.BERT, Layers: 1, Heads: 2, HeadDim: 2, Hidden: 4, Seq: 3, Labels: 2, MLPHidden: 2}
	net, err := RandomNet(a, 1)
	if err != nil {
		t.Fatal(err)
	}
	good := make([]float64, 2*3*4)
	other := a
	other.Labels = 3
	for _, c := range []struct {
		name   string
		arch0  Arch
		in0    *Batch
		in1    *Batch
		batch  int
		errSub string
	}{
		{"short input", a, nil, &Batch{X: good[:5]}, 2, "embedded values"},
		{"mask value 2", a, nil, &Batch{X: good, Mask: [][]int{{1, 2, 0}, {1, 1, 1}}}, 2, "want 0 or 1"},
		{"mask rows", a, nil, &Batch{X: good, Mask: [][]int{{1, 1, 1}}}, 2, "mask rows"},
		{"model owner input", a, &Batch{X: good}, &Batch{X: good}, 2, "no inputs"},
		{"model owner private mask", a, &Batch{Mask: [][]int{{1, 1, 1}, {1, 1, 1}}}, &Batch{X: good}, 2, "private input"},
		{"architecture mismatch", other, nil, &Batch{X: good}, 2, "differs"},
		{"zero batch", a, nil, &Batch{X: good}, 0, "batch size"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := RunLocal(context.Background(), LocalConfig{}, func(ctx context.Context, s *protocol.Session) (bool, error) {
				arch, in := a, c.in1
				var nw *Net
				if s.Party() == 0 {
					arch, in, nw = c.arch0, c.in0, net
				}
				p, err := Prepare(ctx, s, arch, nw, Options{})
				if err != nil {
					return false, err
				}
				_, err = p.Forward(ctx, s, c.batch, in)
				return err == nil, err
			})
			if err == nil || !strings.Contains(err.Error(), c.errSub) {
				t.Errorf("error %v, want one containing %q", err, c.errSub)
			}
		})
	}
	if _, err := Prepare(context.Background(), nil, Arch{}, nil, Options{}); err == nil {
		t.Error("Prepare of an invalid architecture: no error")
	}
}
