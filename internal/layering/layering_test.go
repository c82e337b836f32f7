package layering

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/selectformer/selectformer/"

// layer is each library package's place in DESIGN.md's order: a package may
// import packages of a lower layer (and, in its own directory tree, its
// parent), never one of its own layer or above. A library package missing
// here fails the test: place it when you add it.
var layer = map[string]int{
	"internal/prio":          0,
	"internal/atomicfile":    0,
	"internal/strictjson":    0,
	"share/internal/cudadrv": 0,
	"share":                  1,
	"transport":              2,
	"beaver":                 3,
	"beaver/ot":              4,
	"beaver/he":              3, // below beaver/ot, which runs it (ot.LinearHE)
	"protocol":               5,
	"nn":                     1,
	"nn/safetensors":         2,
	"nn/wordpiece":           2,
	"nn/model":               3,
	"nn/mlm":                 4,
	"mlp":                    4,
	"proxy":                  6,
	"proxy/secure":           7,
	"selection/topk":         7,
	"selection/lanes":        7,
	"selection/pool":         7,
	"selection":              8,
}

// outside are the trees that are not library packages: harnesses, demo data,
// binaries and benchmarks may import anything.
var outside = []string{"bench", "examples", "internal/harness", "internal/layering"}

// TestImportsPointDown: no library package imports one above it (or beside
// it) in DESIGN.md's order, nor a harness, demo-data, example or benchmark
// package; every library package has a place in the order.
func TestImportsPointDown(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(os.PathSeparator)))
		if path == root {
			return nil
		}
		if name := d.Name(); name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return filepath.SkipDir
		}
		for _, o := range outside {
			if rel == o || strings.HasPrefix(rel, o+"/") {
				return filepath.SkipDir
			}
		}
		pkg, err := build.ImportDir(path, 0)
		if _, ok := err.(*build.NoGoError); ok {
			return nil
		}
		if err != nil {
			return err
		}
		if pkg.Name == "main" {
			return nil
		}
		seen++
		l, ok := layer[rel]
		if !ok {
			t.Errorf("%s: a library package without a place in DESIGN.md's order (add it to layer and to DESIGN.md)", rel)
			return nil
		}
		for _, imp := range pkg.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := strings.TrimPrefix(imp, module)
			if strings.HasPrefix(rel, dep+"/") {
				continue // a package below its parent's directory may use the parent
			}
			dl, ok := layer[dep]
			switch {
			case !ok:
				t.Errorf("%s imports %s, which is not a library package", rel, dep)
			case dl >= l:
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must point down", rel, l, dep, dl)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < len(layer)-1 {
		t.Fatalf("walked %d library packages, the order names %d", seen, len(layer))
	}
}
