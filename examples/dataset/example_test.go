package dataset_test

import (
	"fmt"

	"github.com/selectformer/selectformer/examples/dataset"
)

// Example builds the paper's setting on the bundled MNIST subset: a public
// pretraining split, a balanced test set, a skewed unlabeled pool and a
// random bootstrap sample drawn from it.
func Example() {
	mnist, err := dataset.MNIST()
	if err != nil {
		panic(err)
	}
	rng := dataset.NewRand(42)
	all := dataset.Indices(mnist.Len())
	public, rest, _ := dataset.SplitPublic(all, 500, rng)
	test, _ := dataset.BalancedSample(mnist.Labels, rest, 10, 50, rng)
	inTest := map[int]bool{}
	for _, i := range test {
		inTest[i] = true
	}
	var candidates []int
	for _, i := range rest {
		if !inTest[i] {
			candidates = append(candidates, i)
		}
	}
	keep, _ := dataset.LongTailKeep(10, 0.1)
	pool, _ := dataset.ImbalancedPool(mnist.Labels, candidates, keep, rng)
	boot, _ := dataset.Bootstrap(pool, 100, rng)
	testCounts, _ := dataset.ClassCounts(mnist.Labels, test, 10)
	poolCounts, _ := dataset.ClassCounts(mnist.Labels, pool, 10)
	fmt.Println(len(public), len(test), testCounts)
	fmt.Println(poolCounts[0] > 5*poolCounts[9], len(boot))

	spam, err := dataset.SpamAssassin()
	if err != nil {
		panic(err)
	}
	fmt.Println(spam.Len(), spam.ClassNames)
	// Output:
	// 500 500 [50 50 50 50 50 50 50 50 50 50]
	// true 100
	// 1600 [ham spam]
}
