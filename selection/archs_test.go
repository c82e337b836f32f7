package selection

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/transport"
)

// TestCheckArchs plays a model owner that lies in the architectures it
// announces: each lie is refused by the data owner before it prepares
// anything, and honest architectures (pruned heads, an exact-softmax last
// phase, a wider entropy MLP) pass.
func TestCheckArchs(t *testing.T) {
	emb := model.Config{Family: model.ViT, Hidden: 32, Heads: 4, Layers: 2, Intermediate: 64}
	sched := []Phase{{Proxy: proxy.Shape{Layers: 1, Heads: 2, MLPHidden: 8}, Keep: 0.4}, {}}
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

// TestDecodeArchsBomb plays a model owner whose architectures message
// declares a huge list: each `{}` (3 bytes, and a few bytes on the wire once
// compressed) decoded a 152-byte secure.Arch, so the old decoder, which
// unmarshalled the whole list before counting it, allocated some 250 times
// the message (3,356 compressed bytes → 4.2 GiB). The decoder now bounds the
// message's length (archsMessageBound) and counts the architectures as it
// decodes them into a list of the schedule's phases: each bomb is refused,
// and its heap growth stays under 64 KiB (the old code allocated 303 MB on
// the first, 1 MB on the long string, 358 KB on the nesting).
func TestDecodeArchsBomb(t *testing.T) {
	emb := model.Config{Family: model.ViT, Hidden: 32, Heads: 4, Layers: 2, Intermediate: 64}
	sched := []Phase{{Proxy: proxy.Shape{Layers: 1, Heads: 2, MLPHidden: 8}, Keep: 0.4}, {}}
	list := func(n int) []byte { // [{},{},…] of n elements
		return append(append([]byte{'['}, bytes.Repeat([]byte("{},"), n)...), "{}]"...)
	}
	for _, c := range []struct {
		name string
		msg  []byte
	}{
		{"a list of 400,000 architectures (1.2 MB)", list(400_000)},
		{"three architectures for two phases, within the length bound", list(2)},
		{"a long string in a field", []byte(`[{"act":"` + strings.Repeat("x", 1<<20) + `"},{}]`)},
		{"deep nesting", []byte(strings.Repeat("[", 1<<16))},
	} {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			archs, err := decodeArchs(c.msg, &emb, sched, len(sched), 17)
			runtime.ReadMemStats(&after)
			grew := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes: %v; allocated %d bytes", len(c.msg), err, grew)
			if err == nil {
				t.Fatalf("accepted %d architectures", len(archs))
			}
			if grew > 64<<10 {
				t.Errorf("decoding a %d-byte message allocated %d bytes", len(c.msg), grew)
			}
		})
	}
}

// TestDataOwnerChecksArchsWithItsEmbedding: check sets the data owner's
// evaluator once — the embedding of its pool, whose model the received
// architectures are then checked against, or a substitute Evaluator, which
// checks what it needs — so receiveArchs refuses an architecture of another
// width only in the first case.
func TestDataOwnerChecksArchsWithItsEmbedding(t *testing.T) {
	f := newSecureFixture(t)
	d, err := dealer.New()
	if err != nil {
		t.Fatal(err)
	}
	prov, err := d.Provider(1)
	if err != nil {
		t.Fatal(err)
	}
	sub := &valueEvaluator{}
	for _, c := range []struct {
		name    string
		eval    Evaluator
		refused bool
	}{{"embedding", nil, true}, {"substitute evaluator", sub, false}} {
		t.Run(c.name, func(t *testing.T) {
			_, do := f.owners([2]string{})
			do.Evaluator = c.eval
			c0, c1 := transport.Pipe(transport.Options{})
			defer c0.Close()
			defer c1.Close()
			r := &dataOwnerRun{d: do, runner: newRunner(1, do.Params, c1, prov, quiet(), nil, &checkpointStore{party: 1})}
			r.seq = 17
			if err := r.check(); err != nil {
				t.Fatal(err)
			}
			if _, ok := r.eval.(*dataEvaluator); c.eval == nil && (!ok || r.archEmb != &f.target.Config) || c.eval != nil && (r.eval != c.eval || r.archEmb != nil) {
				t.Fatalf("evaluator %T, architectures checked against %v", r.eval, r.archEmb)
			}
			arch := secure.Arch{Family: model.ViT, Layers: 1, Heads: 2, HeadDim: 8, Hidden: 64, Seq: 17, Labels: 10, MLPHidden: 8}
			b, _ := json.Marshal([]secure.Arch{arch, arch})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			go func() { _ = c0.Stream(StreamControl).SendBytes(ctx, b) }()
			r.ctrl = c1.Stream(StreamControl)
			_, err := r.receiveArchs(ctx)
			if refused := err != nil; refused != c.refused || refused && !strings.Contains(err.Error(), "embedding model") {
				t.Errorf("receiveArchs: %v (want refused: %v)", err, c.refused)
			}
		})
	}
}
