package examples_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/selection/pool"
	"github.com/selectformer/selectformer/selection/purchase"
	"github.com/selectformer/selectformer/testharness/sessiontest"
)

// checkPurchase runs the purchase after a finished selection whose parties
// kept their checkpoints in dirs (the model owner's result r0; the data
// owner's pool poolPath, the target in modelDir): 'dataowner deliver'
// writes the bundle and 'modelowner verify' accepts it, auditing every
// selected candidate and flagging none. Then the data owner, having
// evaluated pool A, delivers for three selected candidates the items of a
// pool B of the same sizes and shapes (other pixels, or other texts of the
// same lengths) with pool A's salts and paths: verify exits 6 and names
// exactly those three. verifyArgs go to 'modelowner verify' before the
// bundle (-proxies DIR for a run whose proxies are not in its state).
func checkPurchase(t *testing.T, f *fixture, dirs [2]string, r0 *selection.Result, poolPath, modelDir string, verifyArgs ...string) {
	t.Helper()
	if r0.Commitment == nil || r0.OpeningBytes == 0 {
		t.Fatalf("the selection recorded no commitment (%+v) or no bootstrap openings", r0.Commitment)
	}
	out := t.TempDir()
	bundle := filepath.Join(out, "purchase.bundle")
	bought := len(r0.Bootstrap) + len(r0.Selected)
	lines := runLines(t, f, 0, "dataowner", "deliver", "-state", dirs[1], "-pool", poolPath, "-out", bundle)
	if !strings.HasPrefix(lines[len(lines)-1], fmt.Sprintf("dataowner delivered %d candidates", bought)) {
		t.Fatalf("deliver printed %q", lines)
	}
	verify := func(code int, bundle string) []string {
		args := append([]string{"verify", "-state", dirs[0], "-model", modelDir}, verifyArgs...)
		return runLines(t, f, code, "modelowner", append(args, bundle)...)
	}
	lines = verify(0, bundle)
	summary := lines[len(lines)-1]
	t.Logf("modelowner verify of the honest bundle:\n%s", strings.Join(lines, "\n"))
	want := fmt.Sprintf("modelowner verified %d of %d purchased candidates; audit: %d candidates checked in ", bought, bought, len(r0.Selected))
	if !strings.HasPrefix(summary, want) || !strings.HasSuffix(summary, ", 0 flagged") {
		t.Fatalf("verify printed %q, want %q… 0 flagged", summary, want)
	}

	// Pool B: the same candidates' shapes, other contents.
	a, err := pool.ReadFile(poolPath)
	if err != nil {
		t.Fatal(err)
	}
	other := func(i int) []byte {
		b, err := a.AppendItem(nil, i)
		if err != nil {
			t.Fatal(err)
		}
		for j := range b {
			if a.Images != nil {
				b[j] = 255 - b[j]
			} else if b[j] >= 'a' && b[j] < 'z' {
				b[j]++
			}
		}
		return b
	}
	swapped := []int{r0.Selected[0], r0.Selected[3], r0.Selected[len(r0.Selected)-1]}
	forged := filepath.Join(out, "forged.bundle")
	honest, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	b := sessiontest.RewriteBundle(t, honest, func(op purchase.Opening) purchase.Opening {
		if slices.Contains(swapped, op.Index) {
			op.Item = other(op.Index)
		}
		return op
	})
	if err := os.WriteFile(forged, b, 0o600); err != nil {
		t.Fatal(err)
	}
	lines = verify(6, forged)
	t.Logf("modelowner verify of the forged bundle:\n%s", strings.Join(lines, "\n"))
	named := regexp.MustCompile(`^candidate (\d+) \(record \d+\): its data, salt or path do not match the commitment`)
	var got []int
	for _, l := range lines {
		if m := named.FindStringSubmatch(l); m != nil {
			i, _ := strconv.Atoi(m[1])
			got = append(got, i)
		}
	}
	slices.Sort(swapped)
	if !slices.Equal(got, swapped) {
		t.Fatalf("verify names %v, want exactly the swapped %v; it printed:\n%s", got, swapped, strings.Join(lines, "\n"))
	}
	if !strings.Contains(lines[len(lines)-1], fmt.Sprintf("verified %d of %d purchased candidates; 3 failed", bought-3, bought)) {
		t.Fatalf("summary %q", lines[len(lines)-1])
	}
}

// runLines runs a binary to its end and returns its stdout lines; it must
// exit with code.
func runLines(t *testing.T, f *fixture, code int, name string, args ...string) []string {
	t.Helper()
	p := f.start(t, name, args...)
	if got := p.wait(t, 60*time.Second); got != code {
		t.Fatalf("%s %v exited %d, want %d; stderr:\n%s", name, args, got, code, p.stderr)
	}
	// Every line was queued before the process was reaped.
	var lines []string
	for {
		select {
		case l := <-p.lines:
			lines = append(lines, l)
			continue
		default:
		}
		break
	}
	if len(lines) == 0 {
		t.Fatalf("%s %v printed nothing; stderr:\n%s", name, args, p.stderr)
	}
	return lines
}

// TestPurchaseCommandErrors: the purchase subcommands' usage errors exit
// 2, a missing or foreign checkpoint exits 4, and -h exits 0.
func TestPurchaseCommandErrors(t *testing.T) {
	f := getFixture(t)
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.bundle")
	if err := os.WriteFile(junk, []byte("not a bundle"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		has  string
	}{
		{"dataowner", []string{"deliver"}, 2, "-state"},
		{"dataowner", []string{"deliver", "-state", dir, "-pool", f.files.Pool, "-out", filepath.Join(dir, "b")}, 4, "state-p1.json"},
		{"dataowner", []string{"deliver", "-h"}, 0, "Usage: dataowner deliver"},
		{"modelowner", []string{"verify", "-state", dir}, 2, "one bundle file"},
		{"modelowner", []string{"verify", "-state", dir, junk}, 4, "state-p0.json"},
		{"modelowner", []string{"verify", "-h"}, 0, "Usage: modelowner verify"},
	} {
		p := f.start(t, c.name, c.args...)
		p.expect(t, c.code, c.has)
	}
}
