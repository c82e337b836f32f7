package selection_test

import (
	"context"
	"fmt"
	"time"

	"github.com/selectformer/selectformer/selection"
)

func ExampleParseSchedule() {
	phases, err := selection.ParseSchedule("1:4:8@0.3,2:4:16")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range phases {
		fmt.Printf("%d layers, %d heads, MLP width %d, keep %g\n", p.Proxy.Layers, p.Proxy.Heads, p.Proxy.MLPHidden, p.Keep)
	}
	_, err = selection.ParseSchedule("1:4:8,2:4:16")
	fmt.Println(err)
	// Output:
	// 1 layers, 4 heads, MLP width 8, keep 0.3
	// 2 layers, 4 heads, MLP width 16, keep 1
	// selection: schedule: phase 1 "1:4:8": needs @keep (the fraction of candidates that survive it)
}

// ExampleShardSpan cuts a phase of 230 candidates, in batches of 16, into
// the shards of 2 and 3 worker pairs: contiguous, at batch boundaries.
func ExampleShardSpan() {
	for _, k := range []int{2, 3} {
		for s := range k {
			lo, hi := selection.ShardSpan(230, 16, k, s)
			fmt.Printf("K=%d shard %d: candidates [%d, %d)\n", k, s, lo, hi)
		}
	}
	// Output:
	// K=2 shard 0: candidates [0, 112)
	// K=2 shard 1: candidates [112, 230)
	// K=3 shard 0: candidates [0, 80)
	// K=3 shard 1: candidates [80, 160)
	// K=3 shard 2: candidates [160, 230)
}

// ExampleWorkerPool_AwaitDone ends a sharded selection's coordinator side:
// after a successful Run, Done tells the attached workers the selection is
// over (and any that attaches later, while the pool still accepts
// workers), and AwaitDone waits, bounded, until each has been told. Here
// neither of the 2 workers ever connects: AwaitDone gives up at its
// deadline and names them.
func ExampleWorkerPool_AwaitDone() {
	pool, err := selection.NewWorkerPool(0, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	// ... pool.Serve(ctx, listener, fingerprint) in a goroutine, and
	// ModelOwner{Shards: pool}.Run(ctx, conn, prov) succeeded ...
	pool.Done(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	fmt.Println(pool.AwaitDone(ctx))
	// Output:
	// selection: worker pool: workers [0 1] were not told that the selection is done (not connected): context deadline exceeded
}
