package mlp

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/selectformer/selectformer/nn"
)

// TestTrainPinned pins, for fixed small configurations and seeds, a hash of
// the trained weights (and fill values) and of the report's figures, so that a
// change to Train that alters its arithmetic or its use of randomness (the
// order it draws rows, shuffles blocks or initialises weights) fails here. The
// configurations cover several epochs (the block shuffle), a partial last
// block and mini-batch, centred inputs with observed real rows, and a
// softmax MLP (padding, fill). The hashes were taken on amd64 before Train was
// split into its steps; other architectures may fuse multiply-adds, so the
// test runs on amd64 only.
func TestTrainPinned(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("hashes pinned on amd64 (other architectures may fuse multiply-adds)")
	}
	const w = 6
	rng := nn.NewRNG(11)
	rows := make([]float64, 600*w)
	for r := 0; r < 600; r++ {
		shift := 2 * rng.NormFloat64()
		for j := 0; j < w; j++ {
			rows[r*w+j] = shift + float64(j%3) + rng.NormFloat64()
		}
	}
	o, err := NewObserver(AttnSoftmax, w, 512, 12)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Observe(rows); err != nil {
		t.Fatal(err)
	}
	centred := func() *Dataset {
		d, err := NewDataset(o, 2500, false, 0, 13)
		if err != nil {
			t.Fatal(err)
		}
		if d.Gauss, err = o.CentredGaussian(); err != nil {
			t.Fatal(err)
		}
		d.Centre = true
		return d
	}
	for _, c := range []struct {
		name   string
		ds     *Dataset
		hidden int
		cfg    TrainConfig
		want   string
	}{
		{"entropy", &Dataset{Kind: SoftmaxEntropy, Gauss: gaussian(4, 0, 2), N: 2500, Seed: 3}, 8,
			TrainConfig{BatchSize: 100, LR: 1e-2, Epochs: 3, Test: 200, Seed: 5}, "5611f6db29793812694aae4c756e251ae4b1873cedeafa33ac158619da695976"},
		{"invsqrt", &Dataset{Kind: InvSqrt, Gauss: gaussian(1, 1, 0.3), N: 1500, Seed: 2, Eps: 1e-12, Floor: 0.05}, 4,
			TrainConfig{BatchSize: 64, Epochs: 2, Test: 100, Seed: 6}, "6424957213da437dcbe1c7acf51556c1941f3397578d1dd2af01f5295e85861d"},
		{"softmax-centred-real", centred(), 8,
			TrainConfig{BatchSize: 128, LR: 1e-2, Epochs: 2, Test: 300, Seed: 8}, "6eb613c126517c097ce3cb3ae34354aec7f17f4e6b8d477a948d2cb9d5930585"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, rep, err := Train(context.Background(), c.ds, c.hidden, "m", c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			put := func(v float64) { h.Write(binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))) }
			for _, p := range m.Params() {
				for _, v := range p.Value.Data {
					put(v)
				}
			}
			for _, v := range m.Fill {
				put(v)
			}
			for _, v := range []float64{float64(rep.Steps), rep.FinalLoss, rep.SynthMaxAbs, rep.SynthMeanAbs, rep.ConstMeanAbs,
				rep.RealMaxAbs, rep.RealMeanAbs, float64(rep.RealRows), float64(rep.SynthRows), rep.Ranges.InMin, rep.Ranges.InMax,
				rep.Ranges.HiddenMaxAbs, rep.Ranges.OutMin, rep.Ranges.OutMax, rep.Ranges.WeightMaxAbs} {
				put(v)
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != c.want {
				t.Errorf("trained weights and report hash %s, want %s (%v)", got, c.want, rep)
			}
		})
	}
}

// TestTrainSteps checks the step count Train's schedule is set up with.
func TestTrainSteps(t *testing.T) {
	for _, c := range []struct{ n, batch, epochs, want int }{
		{1, 256, 1, 1},
		{1024, 256, 1, 4},
		{1025, 256, 1, 5},                 // a 1-row second block
		{2500, 100, 3, 3 * (11 + 11 + 5)}, // blocks of 1024, 1024 and 452 rows
	} {
		if got := trainSteps(c.n, c.batch, c.epochs); got != c.want {
			t.Errorf("trainSteps(%d, %d, %d) = %d, want %d", c.n, c.batch, c.epochs, got, c.want)
		}
	}
}

// TestWeightedMSE checks the loss over weighted entries and the gradient
// written over y.
func TestWeightedMSE(t *testing.T) {
	y := []float64{1, 2, 5}
	loss := weightedMSE(y, []float64{0, 2, 1}, []float64{1, 1, 0})
	if loss != 0.5 {
		t.Errorf("loss %g, want 0.5", loss)
	}
	if want := []float64{1, 0, 0}; !slices.Equal(y, want) {
		t.Errorf("gradient %v, want %v", y, want)
	}
}
