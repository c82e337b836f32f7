package party

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/selection"
)

func TestParams(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"ok", []string{"-pool-size", "100", "-budget", "40", "-bootstrap", "10"}, ""},
		{"three-phases", []string{"-pool-size", "100", "-budget", "40", "-bootstrap", "10", "-schedule", "1:2:4@0.8,1:2:8@0.5,2:2:16", "-appraisal", "threshold"}, ""},
		{"no-budget", []string{"-pool-size", "100", "-bootstrap", "10"}, "-budget"},
		{"no-bootstrap", []string{"-pool-size", "100", "-budget", "10"}, "-bootstrap"},
		{"budget-over-pool", []string{"-pool-size", "100", "-budget", "101", "-bootstrap", "10"}, "budget"},
		{"keep-too-small", []string{"-pool-size", "100", "-budget", "60", "-bootstrap", "10", "-schedule", "1:2:4@0.1,2:2:8"}, "keeps"},
		{"bad-schedule", []string{"-pool-size", "100", "-budget", "40", "-bootstrap", "10", "-schedule", "x"}, "-schedule"},
		{"bad-appraisal", []string{"-pool-size", "100", "-budget", "40", "-bootstrap", "10", "-appraisal", "median"}, "appraisal"},
		{"negative-batch", []string{"-pool-size", "100", "-budget", "40", "-bootstrap", "10", "-batch", "-1"}, "-batch"},
		{"negative-inflight", []string{"-pool-size", "100", "-budget", "40", "-bootstrap", "10", "-inflight", "-1"}, "-inflight"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			var pf ParamFlags
			pf.Register(fs, true)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			p, err := pf.Params()
			if tc.err == "" {
				if err != nil || p.PoolSize != 100 || p.Budget != 40 || len(p.Schedule) < 2 {
					t.Fatalf("Params() = %+v, %v", p, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || peer.Code(err) != peer.ExitUsage {
				t.Fatalf("error %v (code %d), want a usage error containing %q", err, peer.Code(err), tc.err)
			}
		})
	}
}

// TestInflightFlag: -inflight sets the batches in flight; the old -workers
// (too close to sharding's -worker and -workers-listen) still does, with
// a warning naming -inflight.
func TestInflightFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		warn bool
	}{{[]string{"-inflight", "3"}, false}, {[]string{"-workers", "3"}, true}} {
		fs := flag.NewFlagSet("modelowner", flag.ContinueOnError)
		var out bytes.Buffer
		fs.SetOutput(&out)
		var pf ParamFlags
		pf.Register(fs, true)
		if err := fs.Parse(append([]string{"-pool-size", "100", "-budget", "40", "-bootstrap", "10"}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		p, err := pf.Params()
		if err != nil || p.Workers != 3 {
			t.Fatalf("%v: Params() = %+v, %v", tc.args, p, err)
		}
		if got := strings.Contains(out.String(), "-workers is deprecated: it is -inflight"); got != tc.warn {
			t.Errorf("%v: warning %q", tc.args, out.String())
		}
	}
}

func TestClassify(t *testing.T) {
	mm := &selection.MismatchError{Field: "budget", Local: "40", Peer: "41"}
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, peer.ExitOK},
		{fmt.Errorf("run: %w", mm), peer.ExitUsage},
		{&FlagMismatch{Party: 1, Err: mm}, peer.ExitUsage},
		{errors.New("boom"), peer.ExitFailure},
		{peer.WithCode(peer.ExitInput, errors.New("bad file")), peer.ExitInput},
		// A corrupt checkpoint is a bad input file; the peer's abort and a
		// refused second bootstrap are peer failures.
		{fmt.Errorf("run: %w", &selection.StateError{Path: "s/state-p0.json", Err: errors.New("unexpected end of JSON input")}), peer.ExitInput},
		{&selection.PeerAbortError{Party: 1, Code: selection.AbortInput, Reason: selection.AbortInput.String()}, peer.ExitPeer},
		{fmt.Errorf("selection: %w: no", selection.ErrBootstrapRevealed), peer.ExitPeer},
	} {
		if got := peer.Code(Classify(tc.err)); got != tc.want {
			t.Errorf("Classify(%v) code %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestResultRoundTrip(t *testing.T) {
	r := &selection.Result{Selected: []int{3, 7}, Bootstrap: []int{1}, Survivors: [][]int{{3, 5, 7}, {3, 7}},
		Phases: []selection.PhaseStats{{In: 6, Out: 3, BytesSent: 5 << 20, Shards: []selection.ShardStats{{Shard: 1, Batches: 2, Attempts: 1, ForwardRounds: 9, BytesSent: 2 << 20}}},
			{In: 3, Out: 2}},
		Appraisal: &selection.Appraisal{Mode: selection.AppraiseMean, Mean: 1.5}, Epoch: 1}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := WriteResult(path, nil, r); err != nil {
		t.Fatal(err)
	}
	got, err := ReadResult(path)
	if err != nil || !slices.Equal(got.Selected, r.Selected) || got.Phases[0].BytesSent != 5<<20 || got.Appraisal.Mean != 1.5 {
		t.Fatalf("ReadResult = %+v, %v", got, err)
	}
	// The selected indices are the two parties' business: owner-only.
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("result file mode: %v, %v", fi.Mode(), err)
	}
	var buf bytes.Buffer
	if err := WriteResult("-", &buf, r); err != nil || !strings.Contains(buf.String(), `"selected"`) {
		t.Fatalf("WriteResult(-): %q, %v", buf.String(), err)
	}
	sum := Summary(r)
	for _, want := range []string{"selected 2 points (bootstrap 1)", "phase 1: 6 -> 3", "sent 5.0 MiB", "  pair 1: 2 batches (0 resumed), 1 attempts, 9 forward rounds, sent 2.0 MiB", "mean entropy of the selected set 1.5000"} {
		if !strings.Contains(sum, want) {
			t.Errorf("Summary lacks %q:\n%s", want, sum)
		}
	}
	for _, bad := range []string{`{"selected":[2,1]}`, `{"selected":[-1]}`, `{"survivors":[[1,1]]}`, `[`} {
		if _, err := ParseResult([]byte(bad)); err == nil {
			t.Errorf("ParseResult(%s) accepted", bad)
		}
	}
}

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1536, "1.5 KiB"}, {3 << 30, "3.0 GiB"}} {
		if got := Bytes(tc.n); got != tc.want {
			t.Errorf("Bytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestOracleLabeler(t *testing.T) {
	l := OracleLabeler([]int{4, 5, 6})
	got, err := l(context.Background(), []int{2, 0}, modelInput())
	if err != nil || !slices.Equal(got, []int{6, 4}) {
		t.Fatalf("labels %v, %v", got, err)
	}
	if _, err := l(context.Background(), []int{3}, modelInput()); err == nil {
		t.Fatal("index past the labels accepted")
	}
}

func FuzzParseResult(f *testing.F) {
	f.Add([]byte(`{"selected":[1,2],"bootstrap":[0],"survivors":[[1,2,3],[1,2]],"phases":[{"in":3}]}`))
	f.Add([]byte(`{"selected":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseResult(b)
		if err == nil && !slices.IsSorted(r.Selected) {
			t.Fatalf("accepted unsorted selection %v", r.Selected)
		}
	})
}

func ExampleParamFlags() {
	fs := flag.NewFlagSet("modelowner", flag.ContinueOnError)
	var pf ParamFlags
	pf.Register(fs, true)
	_ = fs.Parse([]string{"-pool-size", "600", "-budget", "160", "-bootstrap", "100", "-schedule", "1:4:8@0.4,2:4:16"})
	p, err := pf.Params()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range p.Schedule {
		fmt.Printf("l=%d w=%d d=%d keep=%g\n", s.Proxy.Layers, s.Proxy.Heads, s.Proxy.MLPHidden, s.Keep)
	}
	// Output:
	// l=1 w=4 d=8 keep=0.4
	// l=2 w=4 d=16 keep=1
}

func modelInput() model.Input { return model.Input{} }
