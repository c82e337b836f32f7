package selection_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// scores is a stand-in for the secure proxy forward: the data owner shares a
// made-up entropy per candidate. Real deployments leave Evaluator nil and
// pass the model owner's Target (or Proxies) and the data owner's Pool and
// public Embedding model.
type scores struct{}

func (scores) Arch(phase, seq int) (secure.Arch, error) { return secure.Arch{}, nil }
func (scores) Prepare(ctx context.Context, s *protocol.Session, phase int, arch secure.Arch, wb uint64) (selection.Forwarder, error) {
	return scores{}, nil
}
func (scores) Forward(ctx context.Context, s *protocol.Session, idx []int) (*share.Tensor, error) {
	if s.Party() == 0 {
		return s.ShareInput(1, nil, len(idx))
	}
	xs := make([]float64, len(idx))
	for j, i := range idx {
		xs[j] = float64(i%10) + float64(i)/1000 // candidates 9, 19, 29, ... score highest
	}
	enc, _ := share.DefaultFixedPoint.EncodeTensor(xs, len(xs))
	return s.ShareInput(1, enc)
}

// Example_evaluator replaces the secure proxy forward by an Evaluator (as
// the tests do) to show the flow alone: two phases and an appraisal.
func Example_evaluator() {
	params := selection.Params{PoolSize: 100, Budget: 12, Bootstrap: 2, BatchSize: 16,
		Schedule: []selection.Phase{{Keep: 0.5}, {}}, Appraisal: selection.AppraiseMean}
	d, _ := dealer.New()
	c0, c1 := transport.Pipe(transport.Options{}) // transport.Dial / Listen between hosts
	defer c0.Close()
	defer c1.Close()
	var wg sync.WaitGroup
	var res [2]*selection.Result
	wg.Add(2)
	go func() { // model owner
		defer wg.Done()
		prov, _ := d.Provider(0)
		mo := &selection.ModelOwner{Params: params, Evaluator: scores{}, EmbeddingHash: "public-checkpoint", Logger: slog.New(slog.DiscardHandler)}
		var err error
		if res[0], err = mo.Run(context.Background(), c0, prov); err != nil {
			fmt.Println(err)
		}
	}()
	go func() { // data owner
		defer wg.Done()
		prov, _ := d.Provider(1)
		do := &selection.DataOwner{Params: params, Evaluator: scores{}, EmbeddingHash: "public-checkpoint", Logger: slog.New(slog.DiscardHandler)}
		var err error
		if res[1], err = do.Run(context.Background(), c1, prov); err != nil {
			fmt.Println(err)
		}
	}()
	wg.Wait()
	fmt.Println("same result:", fmt.Sprint(res[0].Selected) == fmt.Sprint(res[1].Selected))
	fmt.Println("selected:", len(res[0].Selected), "phases:", len(res[0].Phases))
	fmt.Printf("phase 0 kept %d of %d\n", res[0].Phases[0].Out, res[0].Phases[0].In)
	// Output:
	// same result: true
	// selected: 10 phases: 2
	// phase 0 kept 49 of 98
}
