package examples_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/examples/internal/demo"
	"github.com/selectformer/selectformer/examples/internal/party"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/selection/pool"
	"github.com/selectformer/selectformer/testharness/twoparty"
)

// TestPublicInputsBinaryMatchesLibrary: the modelowner binary with a file of
// the model owner's public inputs (-public, an image pool file) generates
// the proxies the library makes with the same settings (the zero
// proxy.Config, the examples' MLP points and seed, the file's inputs as
// Config.Public) from the same joint coin, and selects the same set: a run
// of the three binaries, then one of selection.ModelOwner and DataOwner in
// this process (in-process dealer) started from the binaries' coin (their
// state files, progress removed). The proxies must be identical (the
// generation is seeded and deterministic), the entropies equal within a few
// units in the last place (other correlated randomness) and the selections
// equal up to near-ties at a phase's boundary (compareRuns). The binary's
// log says it distils on the public inputs.
func TestPublicInputsBinaryMatchesLibrary(t *testing.T) {
	f := getFixture(t)
	dir := t.TempDir()
	all, err := dataset.MNIST()
	if err != nil {
		t.Fatal(err)
	}
	// Digits from the far end of the bundled set: the demo's splits draw
	// theirs at random, so some may coincide; public inputs need not be
	// disjoint from anything.
	const nPub = 16 // each public input adds 20 mixes to both runs' generation
	pubSet, err := all.Subset(idxs(nPub))
	if err != nil {
		t.Fatal(err)
	}
	pubPath := filepath.Join(dir, "public.sfimg.gz")
	if err := demo.WritePool(pubPath, pubSet); err != nil {
		t.Fatal(err)
	}

	// The binaries, with -public.
	bin0, bin1 := filepath.Join(dir, "bin-mo"), filepath.Join(dir, "bin-do")
	dl, a0, a1 := f.dealer(t, "-once")
	mo, addr := f.modelOwner(t, a0, "-public", pubPath, "-state", bin0, "-log", "info", "-out", filepath.Join(dir, "bin0.json"))
	do := f.dataOwner(t, addr, a1, "-state", bin1, "-out", filepath.Join(dir, "bin1.json"))
	for _, p := range []*proc{mo, do, dl} {
		if code := p.wait(t, 120*time.Second); code != 0 {
			t.Fatalf("%s exited %d; stderr:\n%s", p.name, code, p.stderr)
		}
	}
	if log := mo.stderr.String(); !strings.Contains(log, "distilling on the bootstrap and the -public inputs") || !strings.Contains(log, fmt.Sprintf("public=%d", nPub)) {
		t.Errorf("the model owner's log does not say it distils on the %d public inputs:\n%s", nPub, log)
	}
	ref := readResult(t, filepath.Join(dir, "bin0.json"))
	checkAgree(t, ref, readResult(t, filepath.Join(dir, "bin1.json")))

	// The library, from the same coin, with the same settings.
	lib := [2]string{filepath.Join(dir, "lib-mo"), filepath.Join(dir, "lib-do")}
	startFromCoin(t, [2]string{bin0, bin1}, lib)
	fs := flag.NewFlagSet("params", flag.ContinueOnError)
	var pf party.ParamFlags
	pf.Register(fs, true)
	if err := fs.Parse(append(strings.Fields(testArgs), "-pool-size", fmt.Sprint(f.pool))); err != nil {
		t.Fatal(err)
	}
	params, err := pf.Params()
	if err != nil {
		t.Fatal(err)
	}
	target, err := model.Load(f.files.Checkpoint, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pp, err := pool.ReadFile(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := pp.Input(target.Config, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	labels, err := pool.ReadLabels(f.files.Labels, target.Config.Labels)
	if err != nil {
		t.Fatal(err)
	}
	// The data owner's pool: its inputs, and its candidates (the binary's
	// commitment, recorded in the state files, is to them).
	pl, poolIn, err := party.ReadPool(f.files.Pool, f.files.Checkpoint, target, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	run, err := twoparty.Run(context.Background(), twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) (*selection.Result, error) {
		if p.ID == 0 {
			// The binary's settings: -mlp-points 4000, -gen-seed 1, the
			// bootstrap labelled from the committed candidates.
			m := &selection.ModelOwner{Params: params, Target: target, Generate: proxy.Config{Points: 4000, Seed: 1, Public: pub},
				Label: party.OracleLabeler(labels), StateDir: lib[0], Logger: quiet,
				RequireCommitment: true, ItemInput: party.ItemInput(target.Config, nil)}
			return m.Run(ctx, p.Conn, p.Provider)
		}
		d := &selection.DataOwner{Params: params, Pool: poolIn, Items: pl, Embedding: target, StateDir: lib[1], Logger: quiet}
		return d.Run(ctx, p.Conn, p.Provider)
	})
	if err != nil {
		t.Fatal(err)
	}
	got := run.Out[0]
	checkAgree(t, got, run.Out[1])
	if !slices.Equal(got.Bootstrap, ref.Bootstrap) {
		t.Fatalf("bootstrap %v, the binaries' %v (not the same coin)", got.Bootstrap, ref.Bootstrap)
	}
	for i := range params.Schedule {
		for _, name := range []string{proxy.WeightsFile, proxy.ManifestFile} {
			a, err := os.ReadFile(filepath.Join(selection.ProxyDir(filepath.Join(bin0, "proxies"), i), name))
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(selection.ProxyDir(filepath.Join(lib[0], "proxies"), i), name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Errorf("phase %d: the binary's %s differs from the library's", i+1, name)
			}
		}
	}
	compareRuns(t, ref, got, [2]string{bin0, bin1}, lib)
	t.Logf("binary selected %v, library %v", ref.Selected, got.Selected)
}
