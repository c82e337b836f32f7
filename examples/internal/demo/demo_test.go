package demo

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/selectformer/selectformer/proxy/model"
)

func TestSplitsDisjointAndSkewed(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"default", Config{}},
		{"balanced-small", Config{Seed: 5, Public: 500, TestPerClass: 10, Pool: 100, RareFrac: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.cfg.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			pub, test, pool, err := Splits(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if pub.Len() != cfg.Public || test.Len() != NumClasses*cfg.TestPerClass || pool.Len() != cfg.Pool {
				t.Fatalf("sizes %d/%d/%d, want %d/%d/%d", pub.Len(), test.Len(), pool.Len(), cfg.Public, NumClasses*cfg.TestPerClass, cfg.Pool)
			}
			// Disjoint: no image slice is shared between splits (Subset shares pixel slices).
			seen := map[*float64]string{}
			for name, s := range map[string][][]float64{"public": pub.Images, "test": test.Images, "pool": pool.Images} {
				for _, im := range s {
					if prev, ok := seen[&im[0]]; ok {
						t.Fatalf("image in both %s and %s", prev, name)
					}
					seen[&im[0]] = name
				}
			}
			mix, err := ClassMix(pool.Labels, idxs(pool.Len()))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.RareFrac < 0.5 && mix[0] <= 3*mix[NumClasses-1] {
				t.Fatalf("pool mix %v is not long-tailed", mix)
			}
			// Deterministic.
			_, _, pool2, err := Splits(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(pool.Labels, pool2.Labels) {
				t.Fatal("splits differ for the same seed")
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{{Public: 10}, {Pool: 1}, {RareFrac: 2}, {Pool: 4000}, {Epochs: -1}} {
		if _, _, _, err := Splits(c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

func TestPrepareAndFiles(t *testing.T) {
	start := time.Now()
	d, err := Prepare(Config{Layers: 1, Pool: 60, Epochs: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("prepared in %v, checkpoint accuracy %.3f", time.Since(start).Round(time.Millisecond), d.CheckpointAccuracy)
	if d.CheckpointAccuracy < 0.5 {
		t.Fatalf("checkpoint accuracy %.3f: pretraining failed", d.CheckpointAccuracy)
	}
	dir := t.TempDir()
	f, err := d.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := ReadPool(f.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if pool.Len() != 60 || slices.ContainsFunc(pool.Labels, func(l int) bool { return l != 0 }) {
		t.Fatalf("pool file: %d images, labels %v", pool.Len(), pool.Labels)
	}
	labels, err := ReadLabels(f.Labels, NumClasses)
	if err != nil || !slices.Equal(labels, d.Pool.Labels) {
		t.Fatalf("labels %v, %v", labels, err)
	}
	m, err := model.Load(f.Checkpoint, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mt, err := model.Evaluate(m, model.NormalizeImages(d.Test.Images, 1), d.Test.Labels, 256)
	if err != nil || mt.Accuracy != d.CheckpointAccuracy {
		t.Fatalf("reloaded checkpoint accuracy %v (%v), want %v", mt.Accuracy, err, d.CheckpointAccuracy)
	}
	bad := filepath.Join(dir, "bad.gz")
	if err := os.WriteFile(bad, []byte("not a pool"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPool(bad); err == nil {
		t.Fatal("malformed pool accepted")
	}
}

func TestParseLabels(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"1\n2\n\n# c\n9\n", []int{1, 2, 9}, true},
		{"0", []int{0}, true},
		{"", nil, false},
		{"10\n", nil, false},
		{"-1\n", nil, false},
		{"3 4\n", nil, false},
		{"x\n", nil, false},
	} {
		got, err := ParseLabels([]byte(tc.in), NumClasses)
		if (err == nil) != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("ParseLabels(%q) = %v, %v", tc.in, got, err)
		}
	}
}

func TestRandomSubset(t *testing.T) {
	a, err := RandomSubset(100, 10, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RandomSubset(100, 10, 3)
	if len(a) != 10 || !slices.Equal(a, b) || !slices.IsSorted(a) || len(slices.Compact(slices.Clone(a))) != 10 {
		t.Fatalf("RandomSubset = %v / %v", a, b)
	}
	if _, err := RandomSubset(5, 6, 1); err == nil {
		t.Fatal("k > n accepted")
	}
}

func FuzzParseLabels(f *testing.F) {
	f.Add([]byte("1\n2\n"))
	f.Add([]byte("#x\n\n9"))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLabels(b, NumClasses)
		if err == nil && (len(l) == 0 || slices.ContainsFunc(l, func(v int) bool { return v < 0 || v >= NumClasses })) {
			t.Fatalf("accepted %q as %v", b, l)
		}
	})
}

func ExampleSplits() {
	_, _, pool, err := Splits(Config{Pool: 300})
	if err != nil {
		fmt.Println(err)
		return
	}
	mix, _ := ClassMix(pool.Labels, idxs(pool.Len()))
	fmt.Println(pool.Len(), mix[0] > mix[9])
	// Output: 300 true
}

func idxs(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
