package k8s

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/transport"
)

// TestManifestCommandLines runs every container's command line with the
// binary it names, built from this repository, so that the binary's own
// flag set parses it: each runs in a directory laid out like its pod
// (every mount path under a temporary root, the Secrets' and ConfigMaps'
// keys as files, the arguments' paths moved under the root), with
// JOB_COMPLETION_INDEX set for an Indexed Job's pod, as Kubernetes sets it.
// The certificates are real (fresh identities: the fingerprint flags
// resolve). A worker's and the dealer's private keys are the manifests'
// placeholders: a command line that parses and passes the binary's flag
// checks stops at loading its identity with exit code 4 (bad input file),
// before it listens or dials. A coordinator gets its real key, so it also
// runs its parameter checks (budget, bootstrap, schedule, shards, ...)
// and stops with exit code 4 at the model or checkpoint its empty data
// volume lacks, still before any connection. An unknown flag, a malformed value or flags that do not go
// together stop it with exit code 2 (usage). The same command line with an
// unknown flag appended must give 2, so the test tells the two apart. A
// party's command line is also run in its dealer-free form (-provider=he,
// no dealer flags), which must parse as well.
func TestManifestCommandLines(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries; skipped with -short")
	}
	c := loadCluster(tChecker{t}, os.DirFS("."))
	bin := t.TempDir()
	args := []string{"build", "-o", bin + string(filepath.Separator)}
	built := map[string]bool{}
	for _, w := range c.workloads {
		if !built[w.bin] {
			built[w.bin] = true
			args = append(args, "../"+w.bin)
		}
	}
	// go test puts its GOROOT/bin first on PATH (runtime.GOROOT is empty
	// in a test built with -trimpath).
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ids := map[string][2][]byte{} // certificate and key PEM by name
	for _, name := range []string{"modelowner", "dataowner", "dealer"} {
		id, err := transport.GenerateIdentity(name)
		if err != nil {
			t.Fatal(err)
		}
		cert, key, err := id.MarshalPEM()
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = [2][]byte{cert, key}
	}
	for _, w := range c.workloads {
		t.Run(w.ns+"/"+w.name, func(t *testing.T) {
			root := t.TempDir()
			env := podFiles(t, c, w, root, ids)
			argv := make([]string, len(w.c.Args))
			for i, a := range w.c.Args {
				argv[i] = underRoot(w, root, expand(t, a, env))
			}
			// Where a correct command line stops: a coordinator (its real
			// key) at the model or checkpoint missing from its data
			// volume, after all its parameter checks; the others at the
			// placeholder key.
			stop, why := "no PEM PRIVATE KEY block", "loading the placeholder key"
			if w.coordinator() {
				stop, why = root+"/data/", "reading its data volume (empty here)"
			}
			code, out := runBinary(t, filepath.Join(bin, w.bin), argv, env)
			if code != 4 || !strings.Contains(out, stop) {
				t.Errorf("%s %s\nexit %d, want 4 at %s, after the flags are parsed and checked:\n%s", w.bin, strings.Join(w.c.Args, " "), code, why, lastLines(out, 4))
			}
			if code, out := runBinary(t, filepath.Join(bin, w.bin), append(argv, "-no-such-flag"), env); code != 2 || !strings.Contains(out, "no-such-flag") {
				t.Errorf("with -no-such-flag appended: exit %d, want 2 (usage) naming it:\n%s", code, lastLines(out, 4))
			}
			if w.bin == "dealer" {
				return
			}
			// The dealer-free variant the README and the manifests' comments
			// describe: the three dealer flags dropped, -provider=he.
			var he []string
			for _, a := range argv {
				name, _, _ := strings.Cut(a, "=")
				switch name {
				case "-dealer", "-dealer-fingerprint", "-dealer-budget":
				case "-provider":
					he = append(he, "-provider=he")
				default:
					he = append(he, a)
				}
			}
			if code, out := runBinary(t, filepath.Join(bin, w.bin), he, env); code != 4 || !strings.Contains(out, stop) {
				t.Errorf("dealer-free (%s): exit %d, want 4 as with the dealer:\n%s", strings.Join(he, " "), code, lastLines(out, 4))
			}
		})
	}
}

// podFiles lays out w's mounts under root: Secret and ConfigMap keys as
// files (a certificate key, NAME.crt or the party's own party.crt, as the
// certificate of ids[NAME]; a coordinator's party.key as its real key,
// since it stops at its empty data volume before any connection; any other
// key with the manifest's content), other volumes as empty directories.
// It returns the container's environment, as Kubernetes would set it for
// index 0.
func podFiles(t *testing.T, c *cluster, w *workload, root string, ids map[string][2][]byte) map[string]string {
	t.Helper()
	for _, vm := range w.c.VolumeMounts {
		dir := filepath.Join(root, vm.MountPath)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		var files map[string]string
		for _, v := range w.tmpl.Spec.Volumes {
			switch {
			case v.Name != vm.Name:
			case v.Secret != nil:
				s := c.secrets[w.ns+"/"+v.Secret.SecretName]
				files = map[string]string{}
				for k, d := range s.Data {
					files[k] = string(d)
				}
				for k, d := range s.StringData {
					files[k] = d
				}
			case v.ConfigMap != nil:
				files = c.configMaps[w.ns+"/"+v.ConfigMap.Name].Data
			}
		}
		for k, d := range files {
			name := strings.TrimSuffix(k, ".crt")
			if k == "party.crt" {
				name = w.bin
			}
			if id, ok := ids[name]; ok && strings.HasSuffix(k, ".crt") {
				d = string(id[0])
			}
			if k == "party.key" && w.coordinator() {
				d = string(ids[w.bin][1])
			}
			if err := os.WriteFile(filepath.Join(dir, k), []byte(d), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	env := map[string]string{"HOME": root, "TMPDIR": filepath.Join(root, "tmp")}
	if idx, _ := w.indexed(); idx {
		env["JOB_COMPLETION_INDEX"] = "0"
	}
	for _, e := range w.c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = expand(t, e.Value, env)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == indexAnnotation:
			env[e.Name] = "0"
		default:
			t.Fatalf("%s: env %s: no value for %+v in this test", w, e.Name, e.ValueFrom)
		}
	}
	return env
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand replaces $(VAR) as Kubernetes does in args and env values; an
// undefined variable fails the test (Kubernetes would leave it as it is).
func expand(t *testing.T, s string, env map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		v, ok := env[m[2:len(m)-1]]
		if !ok {
			t.Errorf("%q refers to %s, which the container's environment does not define", s, m)
		}
		return v
	})
}

// underRoot moves a path argument (-name=/mount/path...) under root.
func underRoot(w *workload, root, arg string) string {
	name, v, ok := strings.Cut(arg, "=")
	if !ok {
		return arg
	}
	if vm, _ := mountOf(w, v); vm != nil {
		return name + "=" + filepath.Join(root, v)
	}
	return arg
}

// runBinary runs bin with args and only env, at most 30 s, and returns its
// exit code and output.
func runBinary(t *testing.T, bin string, args []string, env map[string]string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: still running after 30 s (it should stop at its identity):\n%s", bin, strings.Join(args, " "), out)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	return 0, string(out)
}

// lastLines is the last n lines of out (a usage error's message is last,
// after the flags' help).
func lastLines(out string, n int) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
