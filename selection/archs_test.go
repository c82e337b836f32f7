package selection

import (
	"strings"
	"testing"

	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/model"
	"github.com/selectformer/selectformer/proxy/secure"
)

// TestCheckArchs plays a model owner that lies in the architectures it
// announces: each lie is refused by the data owner before it prepares
// anything, and honest architectures (pruned heads, an exact-softmax last
// phase, a wider entropy MLP) pass.
func TestCheckArchs(t *testing.T) {
	emb := model.Config{Family: model.ViT, Hidden: 32, Heads: 4, Layers: 2, Intermediate: 64}
	sched := []Phase{{Proxy: proxy.Shape{Layers: 1, Heads: 2, Hidden: 8}, Keep: 0.4}, {}}
	good := func() []secure.Arch {
		return []secure.Arch{
			{Family: model.ViT, Layers: 1, Heads: 2, HeadDim: 8, Hidden: 32, Seq: 17, Labels: 10, MLPHidden: 8},
			{Family: model.ViT, Layers: 2, Heads: 4, HeadDim: 8, Hidden: 32, Seq: 17, Labels: 10, MLPHidden: 16,
				EntropyHidden: 128, Ablation: proxy.NoAttnSM},
		}
	}
	if err := checkArchs(good(), emb, sched, 17); err != nil {
		t.Fatalf("honest architectures refused: %v", err)
	}
	for _, c := range []struct {
		name   string
		edit   func([]secure.Arch)
		errSub string
	}{
		{"other family", func(a []secure.Arch) { a[1].Family = model.BERT }, "embedding model"},
		{"other width", func(a []secure.Arch) { a[0].Hidden = 64 }, "embedding model"},
		{"other sequence", func(a []secure.Arch) { a[0].Seq = 18 }, "tokens"},
		{"not the schedule's shape", func(a []secure.Arch) { a[0].Heads = 3 }, "schedule"},
		{"more layers than the checkpoint", func(a []secure.Arch) { a[1].Layers = 3 }, "does not fit the checkpoint"},
		{"more heads than the checkpoint", func(a []secure.Arch) { a[1].Heads = 5 }, "does not fit the checkpoint"},
		{"wider heads", func(a []secure.Arch) { a[1].HeadDim = 1 << 12 }, "does not fit the checkpoint"},
		{"an FFN the checkpoint does not have", func(a []secure.Arch) { a[1].Intermediate, a[1].Act = 4096, "relu" }, "does not fit the checkpoint"},
		{"huge entropy MLP", func(a []secure.Arch) { a[1].EntropyHidden = 1 << 20 }, "entropy MLP hidden width"},
		{"huge MLPs", func(a []secure.Arch) { a[1].MLPHidden = 1 << 20 }, "too large"},
		{"too many layers", func(a []secure.Arch) { a[1].Layers = 1 << 20 }, "too large"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := good()
			c.edit(a)
			err := checkArchs(a, emb, sched, 17)
			if err == nil || !strings.Contains(err.Error(), c.errSub) {
				t.Errorf("error %v, want one containing %q", err, c.errSub)
			}
		})
	}
}
