package protocol

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// countingGEMM wraps a backend and records the shapes it was handed.
type countingGEMM struct {
	share.GEMMBackend
	mu      sync.Mutex
	weights [][2]int // (batch, m) of each MulWeights
	batched [][4]int // (batch, m, k, n) of each BatchMatMul
}

func (c *countingGEMM) MulWeights(out, a []uint64, batch, m int, w *share.WeightMatrix) error {
	c.mu.Lock()
	c.weights = append(c.weights, [2]int{batch, m})
	c.mu.Unlock()
	return c.GEMMBackend.MulWeights(out, a, batch, m, w)
}

func (c *countingGEMM) BatchMatMul(out, a, b []uint64, batch, m, k, n int) error {
	c.mu.Lock()
	c.batched = append(c.batched, [4]int{batch, m, k, n})
	c.mu.Unlock()
	return c.GEMMBackend.BatchMatMul(out, a, b, batch, m, k, n)
}

// TestMatMulThroughGEMMBackend runs MatMul and MatMulWeights with the limb
// method's CPU reference as each session's backend: the products go through
// the backend (batched by candidates × tokens), give the exact ring result,
// and cost exactly the rounds and bytes they cost on the CPU backend.
func TestMatMulThroughGEMMBackend(t *testing.T) {
	const k, n = 6, 5
	w := randRing(42, k, n)
	x := randRing(7, 2, 3, k)
	y := randRing(8, 2, k, 4)
	w2, _ := w.Reshape(k, n)
	wantW, _ := share.MatMul(mustReshape(t, x, 6, k), w2)
	wantXY, _ := share.MatMul(x, y)
	xsh, ysh := splitTensor(x, 1), splitTensor(y, 2)
	var backends [2]*countingGEMM
	r := runPair(t, func(ctx context.Context, s *Session) ([2]*share.Tensor, error) {
		g := &countingGEMM{GEMMBackend: share.GonumLimbGEMM()}
		backends[s.Party()] = g
		s.SetGEMM(g)
		if got, err := s.GEMM(); err != nil || got != share.GEMMBackend(g) {
			t.Errorf("party %d: Session.GEMM() = %v, %v", s.Party(), got, err)
		}
		var wt *share.Tensor
		if s.Party() == 0 {
			wt = w
		}
		h, err := s.ShareWeight(ctx, 9, wt, k, n)
		if err != nil {
			return [2]*share.Tensor{}, err
		}
		yw, err := s.MatMulWeights(ctx, pickShare(s, xsh), h)
		if err != nil {
			return [2]*share.Tensor{}, err
		}
		xy, err := s.MatMul(ctx, pickShare(s, xsh), pickShare(s, ysh))
		return [2]*share.Tensor{yw, xy}, err
	})
	// ShareWeight, MatMulWeights and MatMul: the costs of the CPU path.
	b := wireBytes(x.Len() + y.Len())
	wantCost(t, r, [2]int64{3, 3}, [2]int64{wireBytes(k*n) + b, wireBytes(x.Len()) + b})
	gotW := openPair(t, [2]*share.Tensor{r.Out[0][0], r.Out[1][0]})
	if !slices.Equal(gotW.Data, wantW.Data) || !slices.Equal(gotW.Shape, []int{2, 3, n}) {
		t.Fatalf("MatMulWeights: got %v, want %v", gotW, wantW)
	}
	gotXY := openPair(t, [2]*share.Tensor{r.Out[0][1], r.Out[1][1]})
	if !slices.Equal(gotXY.Data, wantXY.Data) {
		t.Fatalf("MatMul: got %v, want %v", gotXY, wantXY)
	}
	for p, g := range backends {
		if !slices.Equal(g.weights, [][2]int{{2, 3}}) {
			t.Errorf("party %d: MulWeights calls %v, want one of batch 2 × 3 rows", p, g.weights)
		}
		if !slices.Equal(g.batched, [][4]int{{2, 3, k, 4}, {2, 3, k, 4}}) {
			t.Errorf("party %d: BatchMatMul calls %v, want two of 2 × (3×%d·%d×4)", p, g.batched, k, k)
		}
	}
}

// failingGEMM is a backend whose products fail.
type failingGEMM struct{ share.GEMMBackend }

var errDeviceLost = errors.New("device lost")

func (failingGEMM) MulWeights([]uint64, []uint64, int, int, *share.WeightMatrix) error {
	return errDeviceLost
}

func (failingGEMM) BatchMatMul([]uint64, []uint64, []uint64, int, int, int, int) error {
	return errDeviceLost
}

// TestMatMulGEMMBackendError checks that a backend's failure reaches the
// caller of MatMul and MatMulWeights as a wrapped error, on both parties,
// without a hang.
func TestMatMulGEMMBackendError(t *testing.T) {
	const k, n = 4, 3
	w := randRing(1, k, n)
	x, y := randRing(2, 2, k), randRing(3, k, n)
	xsh, ysh := splitTensor(x, 1), splitTensor(y, 2)
	runPair(t, func(ctx context.Context, s *Session) (int, error) {
		s.SetGEMM(failingGEMM{share.CPUGEMM()})
		var wt *share.Tensor
		if s.Party() == 0 {
			wt = w
		}
		h, err := s.ShareWeight(ctx, 3, wt, k, n)
		if err != nil {
			return 0, err
		}
		if _, err := s.MatMulWeights(ctx, pickShare(s, xsh), h); !errors.Is(err, errDeviceLost) {
			t.Errorf("party %d: MatMulWeights error %v, want the backend's", s.Party(), err)
		}
		if _, err := s.MatMul(ctx, pickShare(s, xsh), pickShare(s, ysh)); !errors.Is(err, errDeviceLost) {
			t.Errorf("party %d: MatMul error %v, want the backend's", s.Party(), err)
		}
		return 0, nil
	})
}

// TestForcedGEMMBackendUnavailable runs a child test process with
// SELECTFORMER_GEMM naming a backend that is not compiled in: every product
// must fail with an error naming the variable, before any message is sent.
func TestForcedGEMMBackendUnavailable(t *testing.T) {
	if os.Getenv("SELECTFORMER_TEST_FORCED_GEMM_CHILD") == "1" {
		forcedGEMMChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestForcedGEMMBackendUnavailable$", "-test.v")
	cmd.Env = append(os.Environ(), share.GEMMEnv+"=tpu", "SELECTFORMER_TEST_FORCED_GEMM_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func forcedGEMMChild(t *testing.T) {
	const k, n = 4, 3
	w := randRing(1, k, n)
	x := randRing(2, 2, k)
	xsh := splitTensor(x, 1)
	r := runPair(t, func(ctx context.Context, s *Session) (int, error) {
		var wt *share.Tensor
		if s.Party() == 0 {
			wt = w
		}
		h, err := s.ShareWeight(ctx, 3, wt, k, n)
		if err != nil {
			return 0, err
		}
		_, err = s.MatMulWeights(ctx, pickShare(s, xsh), h)
		if err == nil || !errors.Is(err, share.ErrGEMMUnavailable) || !strings.Contains(err.Error(), "SELECTFORMER_GEMM=tpu") {
			t.Errorf("party %d: MatMulWeights with SELECTFORMER_GEMM=tpu: %v", s.Party(), err)
		}
		return 0, nil
	})
	// Only ShareWeight's message was sent: the product failed before its own.
	wantCost(t, r, [2]int64{1, 1}, [2]int64{wireBytes(k * n), 0})
}
