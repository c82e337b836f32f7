package layering

import (
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/selectformer/selectformer/"

// layer is each library package's place in DESIGN.md's order: a package may
// import packages of a lower layer, never one of its own layer or above. A
// library package missing here fails the test: place it when you add it.
var layer = map[string]int{
	"internal/prio":               0,
	"internal/atomicfile":         0,
	"internal/strictjson":         0,
	"internal/memlimit":           0,
	"share/internal/cudadrv":      0,
	"share":                       1,
	"transport":                   2,
	"beaver":                      3,
	"beaver/dealer":               4, // the dealers, beside the other providers
	"beaver/marks":                4, // a wrapper of any provider
	"beaver/ot":                   4,
	"beaver/he":                   3, // below beaver/ot, whose lattice weight masks run it
	"beaver/source":               5, // above the providers it names and opens
	"protocol":                    5,
	"nn":                          1,
	"nn/safetensors":              2,
	"nn/wordpiece":                2,
	"nn/model":                    3,
	"nn/mlm":                      4, // above nn/model, whose encoders it pretrains
	"mlp":                         4,
	"proxy":                       6,
	"proxy/secure":                7,
	"selection/topk":              7,
	"selection/lanes":             7,
	"selection/pool":              7,
	"selection/purchase":          8, // above proxy/secure, whose documented error sizes the audit's tolerance
	"selection":                   9,
	"selection/shard":             10, // above selection, whose ShardRunner and ForwardRun it implements and runs
	"selection/internal/testhook": 0,
}

// parentImports names every import of a package by a package above it in
// its own directory tree (a child using its parent, or a farther ancestor),
// each one a decision: such an import also points down in layer, and one
// not named here fails even where the layers would allow it. A package
// missing here imports nothing of its ancestors: selection/topk,
// selection/lanes, selection/pool, selection/purchase and selection/internal/testhook
// nothing of selection, beaver/he
// nothing of beaver, nn/safetensors and nn/wordpiece nothing of nn.
var parentImports = map[string][]string{
	"beaver/dealer":   {"beaver"},    // the dealers serve beaver's kinds behind its Provider core
	"beaver/marks":    {"beaver"},    // it wraps a beaver.Provider
	"beaver/ot":       {"beaver"},    // it registers its generators with beaver's Provider core
	"beaver/source":   {"beaver"},    // a source opens a beaver.Provider
	"nn/model":        {"nn"},        // transformer models built from nn's layers
	"nn/mlm":          {"nn"},        // the MLM head and its training on nn's layers and optimiser
	"proxy/secure":    {"proxy"},     // the secure forward of proxy's proxies
	"selection/shard": {"selection"}, // a sharded phase's jobs and workers, behind selection's ShardRunner and ForwardRun
}

// outside are the trees that are not library packages: harnesses, demo
// data, binaries and benchmarks may import anything.
var outside = []string{"bench", "examples", "testharness"}

// importErrors returns what is wrong with the module-internal imports of
// library package rel (paths relative to the module): an import of a
// package that is no library package, one that does not point down in
// layer, or one of an ancestor that parentImports does not name. rel must
// have a layer.
func importErrors(rel string, imports []string) []string {
	var errs []string
	l := layer[rel]
	for _, imp := range imports {
		if !strings.HasPrefix(imp, module) {
			continue
		}
		dep := strings.TrimPrefix(imp, module)
		dl, ok := layer[dep]
		switch {
		case !ok:
			errs = append(errs, fmt.Sprintf("%s imports %s, which is not a library package", rel, dep))
			continue
		case dl >= l:
			errs = append(errs, fmt.Sprintf("%s (layer %d) imports %s (layer %d): imports must point down", rel, l, dep, dl))
		}
		if strings.HasPrefix(rel, dep+"/") && !slices.Contains(parentImports[rel], dep) {
			errs = append(errs, fmt.Sprintf("%s imports its ancestor %s, which parentImports does not allow (name it there, with the reason, if it is meant)", rel, dep))
		}
	}
	return errs
}

// allFiles reads every Go file of a directory whatever its build
// constraints, so that the imports of every build (cuda, purego, each OS
// and architecture) are judged.
var allFiles = func() build.Context {
	c := build.Default
	c.UseAllFiles = true
	return c
}()

// packageDirs walks the module from root and returns the package of every
// directory that holds one (keyed by the directory, relative and
// slash-separated), with the non-test imports of all its files.
func packageDirs(t *testing.T, root string) map[string]*build.Package {
	t.Helper()
	pkgs := map[string]*build.Package{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == root {
			return err
		}
		if name := d.Name(); name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return filepath.SkipDir
		}
		pkg, err := allFiles.ImportDir(path, 0)
		if _, ok := err.(*build.NoGoError); ok {
			return nil
		}
		if err != nil {
			return err
		}
		pkgs[filepath.ToSlash(strings.TrimPrefix(path, root+string(os.PathSeparator)))] = pkg
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// isLibrary reports whether the package in directory rel is a library
// package: not a command, not under an outside tree.
func isLibrary(rel string, pkg *build.Package) bool {
	for _, o := range outside {
		if rel == o || strings.HasPrefix(rel, o+"/") {
			return false
		}
	}
	return pkg.Name != "main"
}

// TestImportsPointDown: no library package imports one above it (or beside
// it) in DESIGN.md's order, nor an ancestor parentImports does not name,
// nor a harness, demo-data, example or benchmark package; every library
// package has a place in the order.
func TestImportsPointDown(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for rel, pkg := range packageDirs(t, root) {
		if !isLibrary(rel, pkg) {
			continue
		}
		seen++
		if _, ok := layer[rel]; !ok {
			t.Errorf("%s: a library package without a place in DESIGN.md's order (add it to layer and to DESIGN.md)", rel)
			continue
		}
		for _, e := range importErrors(rel, pkg.Imports) {
			t.Error(e)
		}
	}
	if seen != len(layer) {
		t.Fatalf("walked %d library packages, the order names %d", seen, len(layer))
	}
	for rel, deps := range parentImports {
		for _, dep := range deps {
			if !strings.HasPrefix(rel, dep+"/") {
				t.Errorf("parentImports: %s is not an ancestor of %s", dep, rel)
			}
		}
	}
}

// TestImportErrorsCatch plants imports the order forbids, and some it
// allows, and checks importErrors' verdict on each: the test above would
// pass a wrong tree if these did not fail.
func TestImportErrorsCatch(t *testing.T) {
	for _, c := range []struct {
		rel     string
		imports []string
		bad     bool
	}{
		{"selection/lanes", []string{"selection"}, true}, // a child using its parent above it
		{"selection/topk", []string{"selection/lanes"}, true},
		{"selection/pool", []string{"selection"}, true},
		{"nn/wordpiece", []string{"nn"}, true},              // down in layer, but no allowed parent import
		{"share/internal/cudadrv", []string{"share"}, true}, // its parent, above it
		{"share", []string{"protocol"}, true},
		{"beaver/he", []string{"beaver"}, true},
		{"protocol", []string{"examples/dataset"}, true},
		{"proxy", []string{"testharness/twoparty"}, true},
		{"selection", []string{"bench"}, true},
		{"selection/lanes", []string{"protocol", "share", "transport", "selection"}, true},
		{"beaver/ot", []string{"beaver", "transport", "share", "beaver/he"}, false},
		{"nn/model", []string{"nn", "nn/safetensors", "nn/wordpiece"}, false},
		{"proxy/secure", []string{"proxy", "protocol", "mlp"}, false},
		{"selection", []string{"selection/lanes", "selection/topk", "selection/pool", "proxy/secure"}, false},
	} {
		imports := make([]string, len(c.imports))
		for i, imp := range c.imports {
			imports[i] = module + imp
		}
		imports = append(imports, "fmt", "golang.org/x/crypto/hkdf") // outside the module: never judged
		errs := importErrors(c.rel, imports)
		if (len(errs) > 0) != c.bad {
			t.Errorf("%s importing %v: errors %q, want bad = %v", c.rel, c.imports, errs, c.bad)
		}
	}
}

// TestDesignListsEveryPackage: DESIGN.md's "Packages" section names every
// package of the module (library, harness, example and command alike) in
// backquotes, so that its table cannot fall behind the tree.
func TestDesignListsEveryPackage(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	design, err := os.ReadFile(filepath.Join(root, "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	sec := packagesSection(string(design))
	if sec == "" {
		t.Fatal(`DESIGN.md has no "## Packages" section`)
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z0-9_/.-]+)/?`").FindAllStringSubmatch(sec, -1) {
		named[m[1]] = true
	}
	for rel := range packageDirs(t, root) {
		if !named[rel] {
			t.Errorf("DESIGN.md's Packages section does not name %s (add it to the table)", rel)
		}
	}
}

// packagesSection returns the text of design's "## Packages" section, up
// to the next second-level heading.
func packagesSection(design string) string {
	i := strings.Index(design, "\n## Packages")
	if i < 0 {
		return ""
	}
	sec := design[i+1:]
	if j := strings.Index(sec[3:], "\n## "); j >= 0 {
		sec = sec[:j+3]
	}
	return sec
}
