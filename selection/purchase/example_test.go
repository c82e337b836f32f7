package purchase_test

import (
	"bytes"
	"fmt"

	"github.com/selectformer/selectformer/selection/purchase"
)

// The data owner commits to its pool, delivers the purchased candidates as
// a bundle, and the model owner verifies the bundle against the root it
// recorded; a bundle with one candidate's data replaced fails on exactly
// that candidate.
func Example() {
	pool := purchase.ByteItems{[]byte("cat"), []byte("dog"), []byte("owl"), []byte("yak"), []byte("emu")}
	var seed purchase.Seed // purchase.NewSeed() in earnest: a secret of the data owner
	seed[0] = 1
	tree, _ := purchase.Commit(pool, seed)
	root := tree.Root() // sent in the handshake, before anything is revealed

	bought := []int{1, 3}
	var bundle bytes.Buffer
	_ = purchase.WriteBundle(&bundle, tree, bought, purchase.Format{Kind: purchase.KindTexts})

	want := purchase.Expect{Root: root, PoolSize: pool.Len(), Indices: bought}
	rep, err := purchase.Verify(bytes.NewReader(bundle.Bytes()), want, nil)
	fmt.Println("honest:", err, rep.OK(), rep.Verified)

	// The same bundle with candidate 3's data swapped for another.
	r, _ := purchase.NewBundleReader(bytes.NewReader(bundle.Bytes()))
	var forged bytes.Buffer
	w, _ := purchase.NewBundleWriter(&forged, r.Header())
	for range bought {
		op, _ := r.Next()
		if op.Index == 3 {
			op.Item = []byte("bee")
		}
		_ = w.Write(op)
	}
	_ = w.Close()
	rep, _ = purchase.Verify(&forged, want, nil)
	for _, it := range rep.Items {
		if it.Problem != "" {
			fmt.Printf("candidate %d: %s\n", it.Index, it.Problem)
		}
	}
	// Output:
	// honest: <nil> true 2
	// candidate 3: its data, salt or path do not match the commitment: not the candidate committed to
}

// ExampleAudit audits a delivery: the revealed order placed candidate 4
// ahead of candidates 1 and 2, but recomputed in the clear it scores far
// below both, beyond the tolerance: the audit flags the two outcomes
// (and so all three candidates) and suspects candidate 4.
func ExampleAudit() {
	pool := purchase.ByteItems{{0}, {1}, {2}, {3}, {4}}
	tree, _ := purchase.Commit(pool, purchase.Seed{7})
	var bundle bytes.Buffer
	_ = purchase.WriteBundle(&bundle, tree, []int{1, 2, 4}, purchase.Format{})
	plain := []float64{0, 0.9, 0.6, 0, 0.1} // the scores recomputed in the clear
	a := &purchase.Audit{
		// The phase kept 1, 2 and 4 and revealed the order 4, 1, 2.
		Phases: []purchase.PhaseOrder{{Survivors: []int{1, 2, 4}, Tiers: []int{1, 2, 0}}},
		Score: func(phase int, items [][]byte) ([]float64, error) {
			out := make([]float64, len(items))
			for j, it := range items {
				out[j] = plain[it[0]]
			}
			return out, nil
		},
		Tolerance: []float64{0.02},
	}
	want := purchase.Expect{Root: tree.Root(), PoolSize: 5, Indices: []int{1, 2, 4}}
	rep, _ := purchase.Verify(&bundle, want, a)
	for _, it := range rep.Items {
		fmt.Printf("candidate %d: checked in %d outcomes, %d contradicted, suspect %v\n", it.Index, it.Audit.Outcomes, it.Audit.Contradicted, it.Audit.Suspect)
	}
	// Output:
	// candidate 1: checked in 2 outcomes, 1 contradicted, suspect false
	// candidate 2: checked in 2 outcomes, 1 contradicted, suspect false
	// candidate 4: checked in 2 outcomes, 2 contradicted, suspect true
}
