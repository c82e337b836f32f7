package shard

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/selection/internal/testhook"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/sessiontest"
	"github.com/selectformer/selectformer/testharness/twoparty"
	"github.com/selectformer/selectformer/transport"
)

// The fixtures of selection's own tests that the sharded runs repeat
// (selection's run_test.go, pipeline_test.go, epoch_test.go), so that a
// sharded run is compared with the unsharded run of the same coin.

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testValue is the data owner's value of candidate idx in phase.
func testValue(phase, idx int) float64 {
	return math.Mod(float64(idx*37+phase*11)*0.6180339887, 7)
}

// shifted is testValue + 1; squared is the plaintext of what the square
// evaluator computes.
func shifted(phase, idx int) float64 { return testValue(phase, idx) + 1 }
func squared(phase, idx int) float64 { v := shifted(phase, idx); return v * v }

func testParams() selection.Params {
	return selection.Params{PoolSize: 240, Budget: 40, Bootstrap: 10, BatchSize: 16, Workers: 3,
		Schedule: []selection.Phase{{Proxy: proxy.Shape{Layers: 1, Heads: 1, MLPHidden: 2}, Keep: 0.5}, {Proxy: proxy.Shape{Layers: 2, Heads: 1, MLPHidden: 4}}}}
}

// fixedCoins are the two parties' coin sources of a repeated selection.
func fixedCoins() [2]*bytes.Reader {
	return [2]*bytes.Reader{bytes.NewReader(bytes.Repeat([]byte{7}, 32)), bytes.NewReader(bytes.Repeat([]byte{9}, 32))}
}

// candidates returns 0..n−1 without the bootstrap indices, ascending.
func candidates(n int, boot []int) []int {
	var out []int
	for i := range n {
		if !slices.Contains(boot, i) {
			out = append(out, i)
		}
	}
	return out
}

// keep is the number of survivors of phase i.
func keep(p selection.Params, i int) int {
	if i == len(p.Schedule)-1 {
		return p.Budget - p.Bootstrap
	}
	return int(float64(p.PoolSize-p.Bootstrap)*p.Schedule[i].Keep + 0.5)
}

// plainSchedule runs the schedule in the clear on value(phase, idx).
func plainSchedule(p selection.Params, boot []int, value func(phase, idx int) float64) [][]int {
	p = p.WithDefaults()
	cand := candidates(p.PoolSize, boot)
	var out [][]int
	for i := range p.Schedule {
		vals := make([]float64, len(cand))
		for j, c := range cand {
			w, _ := p.FixedPoint.Encode(value(i, c))
			vals[j] = p.FixedPoint.Decode(w)
		}
		pos := sessiontest.PlainTopK(vals, cand, keep(p, i))
		next := make([]int, len(pos))
		for j, q := range pos {
			next[j] = cand[q]
		}
		out = append(out, next)
		cand = next
	}
	return out
}

// valueEvaluator is a substitute secure forward: the data owner shares
// value(phase, idx) as its input, and with square Forward returns the
// shared square (drawing square and wrap pairs from the dealer).
type valueEvaluator struct {
	party  int
	value  func(phase, idx int) float64
	fp     share.FixedPoint
	square bool
	// delay, if set, is slept before each batch.
	delay func(phase int, idx []int) time.Duration
}

func (v *valueEvaluator) Arch(phase, seq int) (secure.Arch, error) { return secure.Arch{}, nil }

func (v *valueEvaluator) Prepare(ctx context.Context, s *protocol.Session, phase int, arch secure.Arch, wb uint64) (selection.Forwarder, error) {
	return forwardFunc(func(ctx context.Context, s *protocol.Session, idx []int) (*share.Tensor, error) {
		if v.delay != nil && !s.Rehearsal() {
			select {
			case <-time.After(v.delay(phase, idx)):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return sessiontest.ShareValues(ctx, s, v.fp, phase, idx, v.value, v.square)
	}), nil
}

type forwardFunc func(ctx context.Context, s *protocol.Session, idx []int) (*share.Tensor, error)

func (f forwardFunc) Forward(ctx context.Context, s *protocol.Session, idx []int) (*share.Tensor, error) {
	return f(ctx, s, idx)
}

// weightEvaluator is a valueEvaluator whose Prepare also shares a vector of
// the model owner's under the phase's weight base, so that a run draws
// weight masks as well as triples, square and wrap pairs.
type weightEvaluator struct{ *valueEvaluator }

func (w weightEvaluator) Prepare(ctx context.Context, s *protocol.Session, phase int, arch secure.Arch, wb uint64) (selection.Forwarder, error) {
	if err := sessiontest.ShareWeights(ctx, s, wb); err != nil {
		return nil, err
	}
	return w.valueEvaluator.Prepare(ctx, s, phase, arch, wb)
}

// evaluator is party p's weightEvaluator of shifted, squared.
func evaluator(p int) weightEvaluator {
	return weightEvaluator{&valueEvaluator{party: p, value: shifted, square: true, fp: share.DefaultFixedPoint}}
}

// The helpers shared with selection's tests (testharness/sessiontest).
var (
	common      = sessiontest.Common
	randomWords = sessiontest.RandomWords
)

// pair runs f as both parties of a twoparty.Run (a Pipe with an in-process
// dealer of the given seeds) and returns each party's error.
func pair(t *testing.T, seeds [2]share.Seed, f func(ctx context.Context, party int, conn *transport.Conn, prov beaver.Provider) error) [2]error {
	t.Helper()
	r, _ := twoparty.Run(context.Background(), twoparty.Config{Seeds: seeds}, func(ctx context.Context, p *twoparty.Party) (struct{}, error) {
		return struct{}{}, f(ctx, p.ID, p.Conn, p.Provider)
	})
	return r.Err
}

// loadState reads party's checkpoint in dir with its batch files (the
// layout of selection's package comment).
func loadState(t *testing.T, dir string, party int) *selection.State {
	t.Helper()
	b, err := os.ReadFile(selection.StateFile(dir, party))
	if err != nil {
		t.Fatal(err)
	}
	st, err := selection.DecodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range st.Phases {
		files, _ := filepath.Glob(filepath.Join(selection.BatchDir(dir, party, i), "batch-*.bin"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, _, bs, err := selection.DecodeBatchFile(b)
			if err != nil {
				t.Fatal(err)
			}
			st.Phases[i].Batches = append(st.Phases[i].Batches, bs)
		}
	}
	return st
}

// secureFixture is a tiny ViT target (untrained) with 96 MNIST candidates:
// selection's secure fixture.
type secureFixture struct {
	pool   model.Input
	labels []int
	target *model.Model
	p      selection.Params
	gen    proxy.Config
}

func newSecureFixture(t *testing.T) *secureFixture {
	t.Helper()
	pool, labels, target := sessiontest.TinyViT(t, 96)
	return &secureFixture{pool: pool, labels: labels, target: target,
		p: selection.Params{PoolSize: pool.Len(), Budget: 40, Bootstrap: 24, BatchSize: 16, Workers: 2,
			Schedule: []selection.Phase{{Proxy: proxy.Shape{Layers: 1, Heads: 2, MLPHidden: 8}, Keep: 0.5}, {Proxy: proxy.Shape{Layers: 2, Heads: 2, MLPHidden: 8}}}},
		gen: sessiontest.PlainGeneration(quiet())}
}

// owners are the fixture's two parties, on the fixed coins.
func (f *secureFixture) owners(dirs [2]string) (*selection.ModelOwner, *selection.DataOwner) {
	mo := &selection.ModelOwner{Params: f.p, Target: f.target, Generate: f.gen, Logger: quiet(), StateDir: dirs[0],
		Label: sessiontest.Labels(f.labels)}
	do := &selection.DataOwner{Params: f.p, Pool: f.pool, Embedding: f.target, Logger: quiet(), StateDir: dirs[1]}
	coins := fixedCoins()
	testhook.SetCoinSource(mo, coins[0])
	testhook.SetCoinSource(do, coins[1])
	return mo, do
}
