package examples_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
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
	}
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, b := range bins {
		args = append(args, "./"+b.name)
	}
	if out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), args...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
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
