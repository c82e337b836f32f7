package examples_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/selectformer/selectformer/selection"
)

// freePort returns a loopback address that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// shardedRun starts a sharded selection (K = 2) as processes: the two
// coordinators (the model owner on the given proxies, no generation) and
// two workers per party, the data owner's workers listening for the model
// owner's. It returns the coordinators, the workers' starters (to restart
// one) and the workers.
type shardedRun struct {
	mo, do  *proc
	workers [2][]*proc
	start   func(party, k int) *proc
	wstate  [2][]string
}

func (f *fixture) sharded(t *testing.T, dir string, a0, a1, proxies string, st [2]string, out string) *shardedRun {
	t.Helper()
	const K = 2
	r := &shardedRun{}
	moArgs := append([]string{"-cert", f.path("mo.crt"), "-key", f.path("mo.key"), "-listen", "127.0.0.1:0",
		"-peer-fingerprint", f.path("do.crt"), "-proxies", proxies, "-pool-size", fmt.Sprint(f.pool),
		"-connect-timeout", "20s", "-log", "warn", "-state", st[0], "-out", out + "0.json",
		"-shards", "2", "-workers-listen", "127.0.0.1:0"}, strings.Fields(testArgs)...)
	moArgs = append(moArgs, dealerArgs(a0, f.fp["dealer"])...)
	r.mo = f.start(t, "modelowner", moArgs...)
	moWorkers := strings.TrimPrefix(r.mo.waitLine(t, "modelowner workers listening "), "modelowner workers listening ")
	addr := strings.TrimPrefix(r.mo.waitLine(t, "modelowner listening "), "modelowner listening ")
	r.do = f.dataOwner(t, addr, a1, "-state", st[1], "-out", out+"1.json", "-shards", "2", "-workers-listen", "127.0.0.1:0")
	doWorkers := strings.TrimPrefix(r.do.waitLine(t, "dataowner workers listening "), "dataowner workers listening ")
	pairAddr := []string{freePort(t), freePort(t)}
	for p := range 2 {
		for k := range K {
			r.wstate[p] = append(r.wstate[p], filepath.Join(dir, fmt.Sprintf("w%d-%d", p, k)))
		}
	}
	r.start = func(p, k int) *proc {
		if p == 0 {
			args := []string{"-worker", "-cert", f.path("mo.crt"), "-key", f.path("mo.key"), "-peer-fingerprint", f.path("do.crt"),
				"-connect", pairAddr[k], "-coordinator", moWorkers, "-shard-index", fmt.Sprint(k), "-state", r.wstate[0][k],
				"-connect-timeout", "20s", "-log", "warn"}
			return f.start(t, "modelowner", append(args, dealerArgs(a0, f.fp["dealer"])...)...)
		}
		args := []string{"-worker", "-cert", f.path("do.crt"), "-key", f.path("do.key"), "-peer-fingerprint", f.fp["mo"],
			"-listen", pairAddr[k], "-coordinator", doWorkers, "-shard-index", fmt.Sprint(k), "-state", r.wstate[1][k],
			"-pool", f.files.Pool, "-embedding", f.files.Checkpoint, "-connect-timeout", "20s", "-log", "warn"}
		return f.start(t, "dataowner", append(args, dealerArgs(a1, f.path("dealer.crt"))...)...)
	}
	for p := range 2 {
		for k := range K {
			r.workers[p] = append(r.workers[p], r.start(p, k))
		}
	}
	return r
}

// jobBatches counts the batches the worker with state directory dir has
// checkpointed in its jobs.
func jobBatches(dir string, party int) int {
	return len(jobBatchFiles(dir, party))
}

// jobBatchFiles returns the batch files of the worker's jobs, by their
// path below the worker's state directory with the party's directory
// name replaced (so the two workers of a pair name a batch alike).
func jobBatchFiles(dir string, party int) map[string]string {
	m, _ := filepath.Glob(filepath.Join(dir, "job-*", fmt.Sprintf("batches-p%d", party), "phase-*", "batch-*.bin"))
	out := map[string]string{}
	for _, path := range m {
		rel, _ := filepath.Rel(dir, path)
		out[strings.Replace(rel, fmt.Sprintf("batches-p%d", party), "batches", 1)] = path
	}
	return out
}

// common returns a batch both workers of a pair have checkpointed ("").
func commonBatch(a, b map[string]string) string {
	for k := range a {
		if _, ok := b[k]; ok {
			return k
		}
	}
	return ""
}

// TestShardedProcesses runs a selection sharded over K = 2 worker pairs,
// every party's coordinator and workers (and the dealer) as OS processes
// on loopback: it selects what one pair selects from the same coin and
// proxies (up to fixed-point near-ties, compareRuns); then again with the
// model owner's worker 0 killed (SIGKILL) mid-phase and restarted by the
// test, which resumes from its checkpoint and ends with the same result.
func TestShardedProcesses(t *testing.T) {
	f := getFixture(t)
	dir := t.TempDir()
	dl, a0, a1 := f.dealer(t, "-once")
	ref0, ref1 := filepath.Join(dir, "ref-mo"), filepath.Join(dir, "ref-do")
	mo, addr := f.modelOwner(t, a0, "-state", ref0, "-out", filepath.Join(dir, "ref0.json"))
	do := f.dataOwner(t, addr, a1, "-state", ref1, "-out", filepath.Join(dir, "ref1.json"))
	mo.expect(t, 0, "")
	do.expect(t, 0, "")
	dl.expect(t, 0, "")
	ref := readResult(t, filepath.Join(dir, "ref0.json"))

	for _, kill := range []bool{false, true} {
		name := "clean"
		if kill {
			name = "kill-worker"
		}
		t.Run(name, func(t *testing.T) {
			// Each run starts from the reference's coin, so its sessions
			// are the reference's: a dealer refuses counters it served,
			// so each run gets a fresh one (as TestKillAndResume).
			dl, a0, a1 := f.dealer(t) // serves until SIGTERM: the restarted worker reconnects
			defer dl.cmd.Process.Signal(syscall.SIGTERM)
			start := time.Now()
			st := [2]string{filepath.Join(dir, name+"-mo"), filepath.Join(dir, name+"-do")}
			startFromCoin(t, [2]string{ref0, ref1}, st)
			out := filepath.Join(dir, name)
			r := f.sharded(t, filepath.Join(dir, name), a0, a1, filepath.Join(ref0, "proxies"), st, out)
			if kill {
				deadline := time.Now().Add(60 * time.Second)
				var both string
				for both == "" {
					both = commonBatch(jobBatchFiles(r.wstate[0][0], 0), jobBatchFiles(r.wstate[1][0], 1))
					if time.Now().After(deadline) {
						t.Fatalf("no worker batch checkpointed in 60 s; stderr:\n%s\n%s", r.workers[0][0].stderr, r.workers[1][0].stderr)
					}
					time.Sleep(2 * time.Millisecond)
				}
				done := jobBatches(r.wstate[0][0], 0)
				if err := r.workers[0][0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				r.workers[0][0].wait(t, 10*time.Second)
				t.Logf("killed the model owner's worker 0 after %d checkpointed batches (%s on both sides)", done, both)
				r.workers[0][0] = r.start(0, 0)
				defer func() {
					// The batch both had finished was kept, not redone: its
					// file still holds the first life's epoch (1).
					path := jobBatchFiles(r.wstate[0][0], 0)[both]
					b, err := os.ReadFile(path)
					if err != nil {
						t.Fatalf("the batch %s finished before the kill is gone: %v", both, err)
					}
					_, _, bs, err := selection.DecodeBatchFile(b)
					if err != nil || bs.Epoch != 1 {
						t.Errorf("batch %s finished before the kill: epoch %d, %v; want kept from epoch 1", both, bs.Epoch, err)
					}
				}()
			}
			for _, p := range append([]*proc{r.mo, r.do}, slices.Concat(r.workers[:]...)...) {
				if code := p.wait(t, 90*time.Second); code != 0 {
					var all strings.Builder
					for _, q := range append([]*proc{r.mo, r.do}, slices.Concat(r.workers[:]...)...) {
						fmt.Fprintf(&all, "--- %s:\n%s", q.name, q.stderr)
					}
					t.Fatalf("%s exited %d; all stderr:\n%s", p.name, code, &all)
				}
			}
			r0, r1 := readResult(t, out+"0.json"), readResult(t, out+"1.json")
			checkAgree(t, r0, r1)
			if !slices.Equal(r0.Bootstrap, ref.Bootstrap) {
				t.Fatalf("bootstrap %v, one pair's %v", r0.Bootstrap, ref.Bootstrap)
			}
			compareRuns(t, ref, r0, [2]string{ref0, ref1}, st)
			t.Logf("sharded (%s): %v; selected %v (one pair: %v)", name, time.Since(start).Round(time.Millisecond), r0.Selected, ref.Selected)
		})
	}
}
