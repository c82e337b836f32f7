package secure

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/share"
)

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
			_, err := runLocal(context.Background(), localConfig{}, func(ctx context.Context, s *protocol.Session) (bool, error) {
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

// TestArchValidateBounds: an architecture decoded from a peer cannot size
// the other party's allocations beyond a real transformer's.
func TestArchValidateBounds(t *testing.T) {
	ok := Arch{Family: model.ViT, Layers: 2, Heads: 4, HeadDim: 8, Hidden: 32, Seq: 17, Labels: 10, MLPHidden: 16}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(*Arch)
	}{
		{"layers", func(a *Arch) { a.Layers = MaxLayers + 1 }},
		{"heads", func(a *Arch) { a.Heads, a.HeadDim = MaxWidth+1, 1 }},
		{"head dim", func(a *Arch) { a.Heads, a.HeadDim = 1, MaxWidth+1 }},
		{"heads × head dim", func(a *Arch) { a.Heads, a.HeadDim = 1<<9, 1<<8 }},
		{"hidden", func(a *Arch) { a.Hidden = MaxWidth + 1 }},
		{"seq", func(a *Arch) { a.Seq = MaxWidth + 1 }},
		{"labels", func(a *Arch) { a.Labels = MaxWidth + 1 }},
		{"mlp hidden", func(a *Arch) { a.MLPHidden = MaxWidth + 1 }},
		{"negative mlp hidden with exact modules", func(a *Arch) { a.MLPHidden, a.Ablation = -1, proxy.NoApprox }},
		{"entropy hidden", func(a *Arch) { a.EntropyHidden = MaxWidth + 1 }},
		{"negative entropy hidden", func(a *Arch) { a.EntropyHidden = -1 }},
		{"ffn width", func(a *Arch) { a.Intermediate, a.Act = MaxWidth+1, "relu" }},
		{"embedding rows", func(a *Arch) { a.EmbedRows = 1<<20 + 1 }},
		{"negative embedding rows", func(a *Arch) { a.EmbedRows = -1 }},
		{"√H scores without an entropy MLP", func(a *Arch) { a.SqrtEntropy, a.Ablation = true, proxy.Ablation{ExactEntropy: true} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := ok
			c.edit(&a)
			if err := a.Validate(); err == nil {
				t.Errorf("%+v: no error", a)
			}
		})
	}
}

// TestArchOfProxySqrtEntropy checks that a proxy whose entropy MLP outputs
// √H announces it in its public architecture (the appraisal squares such
// scores), and that a proxy with an exact entropy never does.
func TestArchOfProxySqrtEntropy(t *testing.T) {
	f := getViT(t)
	seq := f.proxy.Model.Config.NumPatches() + 1
	for _, c := range []struct {
		name       string
		sqrt, want bool
		exact      bool
	}{
		{"entropy MLP", false, false, false},
		{"√H MLP", true, true, false},
		{"exact entropy", true, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := *f.proxy
			q.SqrtEntropy = c.sqrt
			if c.exact {
				q.Entropy, q.Ablation.ExactEntropy = nil, true
			}
			a, err := ArchOfProxy(&q, seq)
			if err != nil {
				t.Fatal(err)
			}
			if a.SqrtEntropy != c.want {
				t.Errorf("SqrtEntropy %v, want %v", a.SqrtEntropy, c.want)
			}
		})
	}
}

// TestEncodeUnpadded checks the data owner's embeddings encoding against
// EncodeTensor on a copy with the padded rows cleared: the same words (a
// padded row's NaN never read), and the same error for a bad value in an
// unpadded row.
func TestEncodeUnpadded(t *testing.T) {
	const B, T, H = 2, 3, 200 // large enough for recycled scratch words
	p := &Prepared{fp: share.DefaultFixedPoint}
	// Leave a dirty scratch buffer of the size behind: the padded rows must
	// still come out zero.
	dirty := share.GetWords(B * T * H)
	for i := range dirty {
		dirty[i] = ^uint64(0)
	}
	share.PutWords(dirty)
	w := []uint64{1, 1, 0, 1, 0, 0}
	plain := func(xs []float64) (*share.Tensor, error) {
		c := slices.Clone(xs)
		for r, v := range w {
			if v == 0 {
				clear(c[r*H : (r+1)*H])
			}
		}
		return p.fp.EncodeTensor(c, B, T, H)
	}
	xs := make([]float64, B*T*H)
	for i := range xs {
		xs[i] = float64(i)/7 - 1.5
	}
	for r, v := range w {
		if v == 0 {
			xs[r*H+1] = math.NaN() // padded: never encoded
		}
	}
	got, err := p.encodeUnpadded(xs, w, B, T, H)
	if err != nil {
		t.Fatal(err)
	}
	want, err := plain(xs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Shape, want.Shape) || len(got.Data) != len(want.Data) {
		t.Fatalf("encodeUnpadded: shape %v, %d words; want %v, %d", got.Shape, len(got.Data), want.Shape, len(want.Data))
	}
	for i := range want.Data {
		if got.Data[i] != want.Data[i] {
			t.Fatalf("encodeUnpadded word %d (row %d) = %#x, want %#x", i, i/H, got.Data[i], want.Data[i])
		}
	}
	if _, err := p.encodeUnpadded(xs[1:], w, B, T, H); err == nil {
		t.Fatal("short input: no error")
	}
	xs[3*H+2] = math.Inf(1) // an unpadded row
	_, err = p.encodeUnpadded(xs, w, B, T, H)
	_, wantErr := plain(xs)
	if err == nil || wantErr == nil || err.Error() != wantErr.Error() {
		t.Fatalf("bad value: error %v, want %v", err, wantErr)
	}
}
