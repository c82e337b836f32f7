package selection_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// Example runs a whole private selection in one process: the model owner
// with its target model, the data owner with its pool and the public
// checkpoint's embedding tables, a dealer and a pipe between them. Between
// hosts, each party runs its half alone: transport.Listen / transport.Dial
// for the connection and dealer.Connect for a networked dealer (see
// ExampleModelOwner_Run and ExampleDataOwner_Run).
func Example() {
	ctx := context.Background()
	target, pool := tinyViT(), randomImages(64) // the model owner's model, the data owner's pool
	schedule, _ := selection.ParseSchedule("1:2:8@0.5,2:2:8")
	params := selection.Params{PoolSize: 64, Budget: 20, Bootstrap: 16, Schedule: schedule} // public, equal on both sides
	quiet := slog.New(slog.DiscardHandler)

	d, _ := dealer.New()                          // dealer.Connect(ctx, dealerConn, party) between hosts
	c0, c1 := transport.Pipe(transport.Options{}) // transport.Listen / transport.Dial between hosts
	defer c0.Close()
	defer c1.Close()
	var res [2]*selection.Result
	var errs [2]error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // model owner (party 0)
		defer wg.Done()
		prov, _ := d.Provider(0)
		mo := &selection.ModelOwner{Params: params, Target: target, Generate: proxy.Config{Seed: 1},
			Label: labelBootstrap, Logger: quiet}
		res[0], errs[0] = mo.Run(ctx, c0, prov)
	}()
	go func() { // data owner (party 1)
		defer wg.Done()
		prov, _ := d.Provider(1)
		do := &selection.DataOwner{Params: params, Pool: pool, Embedding: target, Logger: quiet}
		res[1], errs[1] = do.Run(ctx, c1, prov)
	}()
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		fmt.Println(errs[0], errs[1])
		return
	}
	r := res[0]
	fmt.Println("both parties agree:", fmt.Sprint(r.Selected) == fmt.Sprint(res[1].Selected))
	fmt.Printf("buy %d points: the bootstrap (%d, already sent) and the selected (%d)\n",
		len(r.Bootstrap)+len(r.Selected), len(r.Bootstrap), len(r.Selected))
	for i, ph := range r.Phases {
		fmt.Printf("phase %d kept %d of %d candidates\n", i+1, ph.Out, ph.In)
	}
	// Output:
	// both parties agree: true
	// buy 20 points: the bootstrap (16, already sent) and the selected (4)
	// phase 1 kept 24 of 48 candidates
	// phase 2 kept 4 of 24 candidates
}

// tinyViT is an untrained 2-layer ViT for 8×8 grey images and 2 classes
// (model.Load reads a real checkpoint).
func tinyViT() *model.Model {
	m, err := model.New(model.Config{Family: model.ViT, Hidden: 16, Heads: 2, Layers: 2, Intermediate: 32,
		LayerNormEps: 1e-12, HiddenAct: "gelu", ImageSize: 8, PatchSize: 4, NumChannels: 1, Labels: model.DefaultLabels(2)}, 1)
	if err != nil {
		panic(err)
	}
	return m
}

// randomImages is a pool of n random 8×8 grey images.
func randomImages(n int) model.Input {
	prg := share.NewPRG(share.Seed{7}, "example pool")
	imgs := make([][]float64, n)
	for i := range imgs {
		imgs[i] = make([]float64, 64)
		for j := range imgs[i] {
			imgs[i][j] = float64(prg.Intn(256)) / 255
		}
	}
	return model.NormalizeImages(imgs, 1)
}

// labelBootstrap is the model owner's labelling of the bootstrap sample
// (people or an oracle in practice): here, whether the image's upper half
// is brighter than its lower half.
func labelBootstrap(ctx context.Context, idx []int, in model.Input) ([]int, error) {
	labels := make([]int, len(idx))
	for j, img := range in.Pixels {
		var d float64
		for k, v := range img {
			if k < len(img)/2 {
				d += v
			} else {
				d -= v
			}
		}
		if d > 0 {
			labels[j] = 1
		}
	}
	return labels, nil
}
