package shard_test

import (
	"context"
	"fmt"
	"time"

	"github.com/selectformer/selectformer/selection/shard"
)

// ExampleSpan cuts a phase of 230 candidates, in batches of 16, into
// the shards of 2 and 3 worker pairs: contiguous, at batch boundaries.
func ExampleSpan() {
	for _, k := range []int{2, 3} {
		for s := range k {
			lo, hi := shard.Span(230, 16, k, s)
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

// ExampleWorkers_AwaitDone ends a sharded selection's coordinator side:
// after a successful Run, Done tells the attached workers the selection is
// over (and any that attaches later, while Serve still accepts workers),
// and AwaitDone waits, bounded, until each has been told. Here
// neither of the 2 workers ever connects: AwaitDone gives up at its
// deadline and names them.
func ExampleWorkers_AwaitDone() {
	workers, err := shard.NewWorkers(0, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	// ... workers.Serve(ctx, listener, fingerprint) in a goroutine, and
	// selection.ModelOwner{Shards: workers}.Run(ctx, conn, prov) succeeded ...
	workers.Done(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	fmt.Println(workers.AwaitDone(ctx))
	// Output:
	// shard: workers [0 1] were not told that the selection is done (not connected): context deadline exceeded
}
