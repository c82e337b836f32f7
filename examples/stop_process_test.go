package examples_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/selection"
)

// The process tests of issue 39 ("a new user's second hour"): what a party
// binary says when it stops, and what it never asks twice. Each fails on
// d5bf317.

// readState reads party's checkpoint in dir.
func readState(t *testing.T, dir string, party int) *selection.State {
	t.Helper()
	b, err := os.ReadFile(selection.StateFile(dir, party))
	if err != nil {
		t.Fatal(err)
	}
	st, err := selection.DecodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// lastLine returns the last line of a binary's stderr that is not a log
// line (the line the binary ends with), and how many such lines there are.
func lastLine(stderr string) (string, int) {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if !strings.HasPrefix(l, "time=") {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return "", 0
	}
	return out[len(out)-1], len(out)
}

// TestMismatchBeforeTheCoin: everything both parties must agree on is in
// the hello and compared before the coin, so a mismatch stops both parties
// before the data owner's bootstrap is sent (its checkpoint holds no coin
// and no revealed sample), each with the mismatch exit code (2: the flags
// to fix) and one line naming the flag and both values as the flags take
// them. On d5bf317 a -provider mismatch surfaced after the coin, in the OT
// setup, on one side only (exit 1, "ot: setup: the peer runs linear mode
// he ..."; the other side "its run failed"), a -seq mismatch after the
// bootstrap was sent and labelled, and a -schedule mismatch printed wire
// JSON.
func TestMismatchBeforeTheCoin(t *testing.T) {
	f := getFixture(t)
	// noCoin checks that the data owner's checkpoint in dir holds no coin
	// and no revealed sample: nothing was drawn, nothing sent.
	noCoin := func(t *testing.T, dir string) {
		t.Helper()
		if st := readState(t, dir, 1); st.Seed != "" || st.Revealed != nil || st.BootstrapDone {
			t.Errorf("the data owner's checkpoint holds a coin (%q), a revealed sample (%+v) or a bootstrap: the mismatch came after the coin", st.Seed, st.Revealed)
		}
	}
	// oneLine checks that the binary exited with the mismatch code and
	// that its stderr ends with want, on one line of its own, with no wire
	// JSON.
	oneLine := func(t *testing.T, p *proc, want string) {
		t.Helper()
		if code := p.wait(t, 60*time.Second); code != peer.ExitUsage {
			t.Errorf("%s exited %d, want %d", p.name, code, peer.ExitUsage)
		}
		last, n := lastLine(p.stderr.String())
		if last != p.name+": "+want || n != 1 || strings.Contains(last, `{"`) {
			t.Errorf("%s ended with %d line(s), the last:\n%s\nwant:\n%s: %s\nstderr:\n%s", p.name, n, last, p.name, want, p.stderr)
		}
	}
	t.Run("provider", func(t *testing.T) {
		st1 := filepath.Join(t.TempDir(), "do")
		mo, addr := f.modelOwner(t, "", "-provider", "ot")
		do := f.dataOwner(t, addr, "", "-provider", "he", "-state", st1)
		do.wait(t, 60*time.Second)
		mo.wait(t, 60*time.Second)
		noCoin(t, st1)
		oneLine(t, do, "handshake: -provider mismatch: this data owner has -provider he, the model owner -provider ot; both parties must pass the same -provider")
		oneLine(t, mo, "handshake: -provider mismatch: this model owner has -provider ot, the data owner -provider he; both parties must pass the same -provider")
	})
	t.Run("schedule", func(t *testing.T) {
		st1 := filepath.Join(t.TempDir(), "do")
		dl, a0, a1 := f.dealer(t, "-once")
		mo, addr := f.modelOwner(t, a0)
		do := f.dataOwner(t, addr, a1, "-schedule", "1:2:4@0.4,2:2:8", "-state", st1)
		do.wait(t, 60*time.Second)
		mo.wait(t, 60*time.Second)
		dl.expect(t, peer.ExitOK, "")
		noCoin(t, st1)
		oneLine(t, do, "handshake: -schedule mismatch: this data owner has -schedule 1:2:4@0.4,2:2:8@1, the model owner -schedule 1:2:4@0.5,2:2:8@1; both parties must pass the same -schedule")
		oneLine(t, mo, "handshake: -schedule mismatch: this model owner has -schedule 1:2:4@0.5,2:2:8@1, the data owner -schedule 1:2:4@0.4,2:2:8@1; both parties must pass the same -schedule")
	})
	t.Run("seq", func(t *testing.T) {
		// The model owner's -public texts are tokenized to 8 tokens, the
		// data owner's pool to 16.
		_, tf := getTextFixture(t)
		st1 := filepath.Join(t.TempDir(), "do")
		dl, a0, a1 := f.dealer(t, "-once")
		args := append([]string{"-cert", f.path("mo.crt"), "-key", f.path("mo.key"), "-listen", "127.0.0.1:0",
			"-peer-fingerprint", f.path("do.crt"), "-dealer", a0, "-dealer-fingerprint", f.fp["dealer"],
			"-model", tf.files.Checkpoint, "-labels", tf.files.Labels, "-pool-size", fmt.Sprint(tf.pool),
			"-public", tf.files.Pool, "-public-seq", "8",
			"-mlp-points", "2000", "-connect-timeout", "20s", "-log", "warn"}, strings.Fields(textArgs)...)
		mo := f.start(t, "modelowner", args...)
		addr := strings.TrimPrefix(mo.waitLine(t, "modelowner listening "), "modelowner listening ")
		args = append([]string{"-cert", f.path("do.crt"), "-key", f.path("do.key"), "-connect", addr,
			"-peer-fingerprint", f.fp["mo"], "-dealer", a1, "-dealer-fingerprint", f.path("dealer.crt"),
			"-pool", tf.files.Pool, "-embedding", tf.files.Checkpoint, "-seq", "16", "-state", st1,
			"-connect-timeout", "20s", "-log", "warn"}, strings.Fields(textArgs)...)
		do := f.start(t, "dataowner", args...)
		do.wait(t, 60*time.Second)
		mo.wait(t, 60*time.Second)
		dl.expect(t, peer.ExitOK, "")
		noCoin(t, st1)
		hint := "the model owner's -public texts are tokenized to -public-seq tokens, which must be the data owner's -seq (0 on either side: the checkpoint's max_position_embeddings)"
		oneLine(t, do, "handshake: -seq mismatch: this data owner has -seq 16, the model owner -public-seq 8; "+hint)
		oneLine(t, mo, "handshake: -public-seq mismatch: this model owner has -public-seq 8, the data owner -seq 16; "+hint)
	})
}

// TestLabelsNotAskedAgain: the data owner is stopped (Ctrl-C) while the
// model owner generates the proxies, after the bootstrap was labelled;
// both rerun with their -state, and the model owner's label command is
// not run again (it counts its runs in a file). On d5bf317 it ran twice.
func TestLabelsNotAskedAgain(t *testing.T) {
	f := getFixture(t)
	dir := t.TempDir()
	st0, st1, runs := filepath.Join(dir, "mo"), filepath.Join(dir, "do"), filepath.Join(dir, "label-runs")
	t.Setenv(helperEnv, "1")
	t.Setenv(helperOracleEnv, f.files.Labels)
	t.Setenv(helperPoolEnv, f.files.Pool)
	cmd := "echo run >> " + shellQuote(runs) + " && " + shellQuote(os.Args[0]) + " -test.run='^TestHelperLabeller$' -test.count=1"
	dl, a0, a1 := f.dealer(t) // serves until SIGTERM: the parties reconnect
	defer dl.cmd.Process.Signal(syscall.SIGTERM)
	// Enough MLP points that generation takes seconds after the labels.
	moArgs := []string{"-label-cmd", cmd, "-state", st0, "-mlp-points", "60000"}
	mo, addr := f.labellingModelOwner(t, a0, append(moArgs, "-log", "info")...)
	do := f.dataOwner(t, addr, a1, "-state", st1)
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(mo.stderr.String(), "bootstrap labelled") {
		select {
		case <-mo.done:
			t.Fatalf("the model owner exited (%d) before labelling; stderr:\n%s", mo.code, mo.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no labels in 90 s; stderr:\n%s", mo.stderr)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := do.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	do.expect(t, peer.ExitInterrupted, "interrupted: dataowner stopped")
	mo.expect(t, peer.ExitPeer, "the data owner ended the session: its run was cancelled")
	if readState(t, st0, 0).BootstrapDone {
		t.Fatal("the proxies were generated before the interrupt reached the model owner: the test did not stop it in generation (raise -mlp-points)")
	}
	out := filepath.Join(dir, "out")
	mo, addr = f.labellingModelOwner(t, a0, append(moArgs, "-log", "warn", "-out", out+"0.json")...)
	do = f.dataOwner(t, addr, a1, "-state", st1, "-out", out+"1.json")
	mo.expect(t, 0, "")
	do.expect(t, 0, "")
	checkAgree(t, readResult(t, out+"0.json"), readResult(t, out+"1.json"))
	b, err := os.ReadFile(runs)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "run\n"); n != 1 {
		t.Fatalf("the label command ran %d times; want once", n)
	}
}

// TestPeerKilledOneLine: the data owner is killed (SIGKILL) mid-phase; the
// model owner ends with one line saying where it stopped and exactly what
// to rerun — the dealer (a -once dealer, which exits once both parties are
// gone, as here) and both parties with their -state — and no internal
// error chain. On d5bf317 it printed "modelowner: selection: phase 1 batch
// …: transport: read: … connection reset by peer", with no hint.
func TestPeerKilledOneLine(t *testing.T) {
	f := getFixture(t)
	dir := t.TempDir()
	st0, st1 := filepath.Join(dir, "mo"), filepath.Join(dir, "do")
	dl, a0, a1 := f.dealer(t, "-once")
	mo, addr := f.modelOwner(t, a0, "-state", st0)
	do := f.dataOwner(t, addr, a1, "-state", st1)
	waitCheckpointed(t, mo, st0, st1)
	if err := do.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	do.wait(t, 10*time.Second)
	mo.expect(t, peer.ExitFailure, "")
	dl.expect(t, peer.ExitOK, "session over, both parties gone")
	last, n := lastLine(mo.stderr.String())
	want := regexp.MustCompile(`^modelowner: stopped in phase [12] of 2 after \d+ of \d+ batches: the connection to the data owner was lost \(it crashed or was killed, or the link dropped\); ` +
		regexp.QuoteMeta("rerun the dealer if it has exited (a -once dealer exits once both parties are gone), then both parties with the same flags and their -state (here -state "+st0+") to resume") + `$`)
	if n != 1 || !want.MatchString(last) || strings.Contains(last, "transport") {
		t.Fatalf("the model owner ended with %d line(s), the last:\n%s\nstderr:\n%s", n, last, mo.stderr)
	}
	t.Logf("model owner: %s", last)
}

// TestDealerKilledOneLine: the dealer is killed (SIGKILL) mid-phase; each
// party ends with one line saying where it stopped and to restart the
// dealer, then both parties with their -state (on d5bf317 the party whose
// dealer link broke printed the chain of its dealer request, the other
// "its run failed"), and the three restarted resume.
func TestDealerKilledOneLine(t *testing.T) {
	f := getFixture(t)
	dir := t.TempDir()
	st0, st1, seeds := filepath.Join(dir, "mo"), filepath.Join(dir, "do"), filepath.Join(dir, "dealer.seeds")
	dl, a0, a1 := f.dealer(t, "-seeds", seeds)
	mo, addr := f.modelOwner(t, a0, "-state", st0)
	do := f.dataOwner(t, addr, a1, "-state", st1)
	waitCheckpointed(t, mo, st0, st1)
	if err := dl.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	dl.wait(t, 10*time.Second)
	for p, st := range map[*proc]string{mo: st0, do: st1} {
		if code := p.wait(t, 60*time.Second); code != peer.ExitFailure && code != peer.ExitPeer {
			t.Errorf("%s exited %d", p.name, code)
		}
		last, n := lastLine(p.stderr.String())
		want := regexp.MustCompile(`^` + p.name + `: stopped in phase [12] of 2 after \d+ of \d+ batches: .*; ` +
			regexp.QuoteMeta("rerun the dealer") + `.*` + regexp.QuoteMeta("then both parties with the same flags and their -state (here -state "+st+") to resume") + `$`)
		if n != 1 || !want.MatchString(last) || strings.Contains(last, "transport") {
			t.Errorf("%s ended with %d line(s), the last:\n%s\nstderr:\n%s", p.name, n, last, p.stderr)
		}
		t.Logf("%s", last)
	}
	if !strings.Contains(mo.stderr.String()+do.stderr.String(), "the connection to the dealer was lost") {
		t.Errorf("neither party says the dealer was lost:\n%s\n%s", mo.stderr, do.stderr)
	}
	// The rerun the line asks for resumes.
	dl, a0, a1 = f.dealer(t, "-seeds", seeds)
	defer dl.cmd.Process.Signal(syscall.SIGTERM)
	out := filepath.Join(dir, "out")
	mo, addr = f.modelOwner(t, a0, "-state", st0, "-out", out+"0.json")
	do = f.dataOwner(t, addr, a1, "-state", st1, "-out", out+"1.json")
	mo.expect(t, 0, "")
	do.expect(t, 0, "")
	checkAgree(t, readResult(t, out+"0.json"), readResult(t, out+"1.json"))
}

// TestListenInUseIsLocal: a party whose -listen address is taken exits
// with the usage/configuration code naming the flag, not 3 (a peer
// failure), as on d5bf317.
func TestListenInUseIsLocal(t *testing.T) {
	f := getFixture(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	p := f.start(t, "modelowner", "-cert", f.path("mo.crt"), "-key", f.path("mo.key"), "-listen", taken.Addr().String(),
		"-peer-fingerprint", f.fp["do"], "-provider", "ot", "-model", f.files.Checkpoint, "-labels", f.files.Labels,
		"-pool-size", fmt.Sprint(f.pool), "-budget", "40", "-bootstrap", "20")
	p.expect(t, peer.ExitUsage, "flag -listen: ")
}
