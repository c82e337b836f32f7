package examples_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// TestHelp builds every example binary and runs it with -h (and --help): it
// exits 0 and its output starts with one line, beginning with the binary's
// name, that says what the binary does, followed by the flags.
func TestHelp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries; skipped with -short")
	}
	bins := []struct{ name, flag string }{
		{"keygen", "-out-cert"},
		{"dealer", "-listen-p0"},
		{"modelowner", "-peer-fingerprint"},
		{"dataowner", "-embedding"},
		{"quickstart", "-export"},
		{"mkpool", "images -dir DIR"},
		{"mksubsets", "-spam-max-bytes"},
	}
	dir := helpBins(t)
	for _, b := range bins {
		for _, h := range []string{"-h", "--help"} {
			t.Run(b.name+h, func(t *testing.T) {
				out, err := exec.Command(filepath.Join(dir, b.name), h).CombinedOutput()
				if err != nil { // an *exec.ExitError for a non-zero exit
					t.Fatalf("exit: %v\n%s", err, out)
				}
				lines := strings.Split(string(out), "\n")
				if len(lines) < 3 || !strings.HasPrefix(lines[0], b.name+" ") || !strings.HasSuffix(lines[0], ".") || lines[1] != "" ||
					lines[2] != fmt.Sprintf("Usage of %s:", b.name) || !strings.Contains(string(out), b.flag) {
					t.Errorf("help output does not start with a one-line summary, then the flags:\n%s", out)
				}
				if b.name == "modelowner" || b.name == "dataowner" {
					// The sharded selection's flags (examples/k8s runs them).
					for _, fl := range []string{"-shards int", "-workers-listen string", "-worker\n", "-coordinator string", "-shard-index string", "JOB_COMPLETION_INDEX"} {
						if !strings.Contains(string(out), fl) {
							t.Errorf("help output lacks %q", fl)
						}
					}
				}
			})
		}
	}
}

// helpNames are the example binaries.
var helpNames = []string{"keygen", "dealer", "modelowner", "dataowner", "quickstart", "mkpool", "mksubsets"}

var (
	binsOnce sync.Once
	binsDir  string
	binsErr  error
)

// helpBins returns the directory of every example binary (helpNames),
// built once for the package's tests (buildBins).
func helpBins(t *testing.T) string {
	t.Helper()
	dir, err := buildBins()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// buildBins builds every example binary (helpNames) once, in one go build
// (the fixture's, mkpool's and the help tests' binaries alike), and
// returns their directory; TestMain removes it.
func buildBins() (string, error) {
	binsOnce.Do(func() {
		if binsDir, binsErr = os.MkdirTemp("", "selectformer-bin-"); binsErr != nil {
			return
		}
		args := []string{"build", "-o", binsDir + string(filepath.Separator)}
		for _, n := range helpNames {
			args = append(args, "./"+binDir(n))
		}
		// go test puts its GOROOT/bin first on PATH (runtime.GOROOT is
		// empty in a test built with -trimpath).
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			binsErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	return binsDir, binsErr
}

// binDir is the package directory, under examples/, of binary name.
func binDir(name string) string {
	if name == "mksubsets" {
		return "dataset/cmd/mksubsets"
	}
	return name
}

// TestHelpFlagsDocumented: every flag each binary's -h lists is documented
// in README.md or examples/README.md (as `-name`, or -name in a command
// line), so the READMEs match the binaries (issue 39: -pipeline and
// -memory-budget were documented nowhere).
func TestHelpFlagsDocumented(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries; skipped with -short")
	}
	var docs strings.Builder
	for _, p := range []string{"../README.md", "README.md"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs.Write(b)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?:^|[\\s`(\\[])-([a-z][a-z0-9-]*)").FindAllStringSubmatch(docs.String(), -1) {
		documented[m[1]] = true
	}
	dir := helpBins(t)
	flagLine := regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)
	for _, n := range helpNames {
		// mkpool's flags are its subcommands'.
		helps := [][]string{{"-h"}}
		if n == "mkpool" {
			helps = [][]string{{"images", "-h"}, {"texts", "-h"}}
		}
		for _, h := range helps {
			out, err := exec.Command(filepath.Join(dir, n), h...).CombinedOutput()
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", n, h, err, out)
			}
			flags := flagLine.FindAllStringSubmatch(string(out), -1)
			if len(flags) == 0 {
				t.Fatalf("%s %s lists no flag:\n%s", n, h, out)
			}
			for _, f := range flags {
				if !documented[f[1]] {
					t.Errorf("%s -%s is in -h but documented in neither README.md nor examples/README.md", n, f[1])
				}
			}
		}
	}
}
