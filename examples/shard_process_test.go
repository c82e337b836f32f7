package examples_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/selectformer/selectformer/examples/internal/peer"
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

// pairDealers are the dealers of a sharded run in the deployed topology
// (examples/k8s/dealer): one dealer process per worker pair, dealer k
// serving pair k on the loopback address 127.0.k.1 (Linux routes all of
// 127.0.0.0/8 to the loopback interface), every dealer on the same two
// ports, each with its own -seeds file; the coordinators use dealer 0.
type pairDealers struct {
	procs []*proc
	// coord is dealer 0's address for party 0 and for party 1 (the
	// coordinators'); worker is each party's -dealer for its workers,
	// with {shard} in the address, which the worker binary replaces by
	// its shard index (peer.ShardPlaceholder).
	coord, worker [2]string
}

// dealerHost returns dealer k's loopback host (as the workers' -dealer
// names it with k for {shard}).
func dealerHost(k int) string { return fmt.Sprintf("127.0.%d.1", k) }

// startPairDealers starts K dealers serving until SIGTERM (restarted
// workers and coordinators reconnect), at -log info so that each logs the
// parties it serves, with their seeds in dir/prefix-dealerK.seeds. It
// skips the test where 127.0.1.1 cannot be bound (a system that routes
// only 127.0.0.1 to the loopback interface).
func (f *fixture) startPairDealers(t *testing.T, dir, prefix string, K int) *pairDealers {
	t.Helper()
	probe, err := net.Listen("tcp", dealerHost(1)+":0")
	if err != nil {
		t.Skipf("no loopback address %s here, where the dealer of worker pair 1 listens: %v", dealerHost(1), err)
	}
	probe.Close()
	d := &pairDealers{}
	var port [2]string
	for k := range K {
		listen := [2]string{dealerHost(k) + ":0", dealerHost(k) + ":0"}
		if k > 0 {
			for p := range 2 {
				listen[p] = net.JoinHostPort(dealerHost(k), port[p])
			}
		}
		p := f.start(t, "dealer", "-cert", f.path("dealer.crt"), "-key", f.path("dealer.key"),
			"-listen-p0", listen[0], "-listen-p1", listen[1],
			"-p0-fingerprint", f.path("mo.crt"), "-p1-fingerprint", f.fp["do"],
			"-seeds", filepath.Join(dir, fmt.Sprintf("%s-dealer%d.seeds", prefix, k)), "-log", "info")
		d.procs = append(d.procs, p)
		var a [2]string
		l := p.waitLine(t, "dealer listening ")
		if _, err := fmt.Sscanf(l, "dealer listening p0=%s p1=%s", &a[0], &a[1]); err != nil {
			t.Fatalf("dealer %d printed %q: %v", k, l, err)
		}
		if k == 0 {
			d.coord = a
			for p := range 2 {
				_, port[p], _ = net.SplitHostPort(a[p])
				d.worker[p] = "127.0." + peer.ShardPlaceholder + ".1:" + port[p]
			}
		}
	}
	return d
}

// stop ends the dealers (SIGTERM).
func (d *pairDealers) stop() {
	for _, p := range d.procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
}

// checkServed fails the test unless every dealer has served both
// parties (a party connected to it): dealer k is reached only by worker
// pair k's workers, dialling their -dealer with {shard} replaced by k.
func (d *pairDealers) checkServed(t *testing.T) {
	t.Helper()
	for k, p := range d.procs {
		for party := range 2 {
			if !regexp.MustCompile(fmt.Sprintf(`msg="dealer: party connected" role="[^"]*" party=%d `, party)).MatchString(p.stderr.String()) {
				t.Errorf("dealer %d (worker pair %d's, at %s) served no party %d; its stderr:\n%s", k, k, dealerHost(k), party, p.stderr)
			}
		}
	}
}

// shardedRun is a sharded selection (K = 2) as processes: the two
// coordinators (the model owner on the given proxies, no generation) and
// two workers per party, the data owner's workers listening for the model
// owner's, worker k of each party at dealer k of dl and the coordinators
// at dealer 0 (dl's coord); the coordinators listen for their workers on fixed loopback
// ports, so that a restarted coordinator is found again by its workers.
type shardedRun struct {
	mo, do  *proc
	workers [2][]*proc
	// start starts worker k of party (again, to restart one); startMO and
	// startDO start the coordinators (again, with the same flags and
	// state), the data owner's connecting to the model owner at addr.
	start   func(party, k int) *proc
	startMO func(extra ...string) (*proc, string)
	startDO func(addr string, extra ...string) *proc
	wstate  [2][]string
}

func (f *fixture) sharded(t *testing.T, dir string, dl *pairDealers, proxies string, st [2]string, out string) *shardedRun {
	t.Helper()
	const K = 2
	r := &shardedRun{}
	wl := [2]string{freePort(t), freePort(t)}
	moArgs := append([]string{"-cert", f.path("mo.crt"), "-key", f.path("mo.key"), "-listen", "127.0.0.1:0",
		"-peer-fingerprint", f.path("do.crt"), "-proxies", proxies, "-pool-size", fmt.Sprint(f.pool),
		"-connect-timeout", "20s", "-log", "warn", "-state", st[0], "-out", out + "0.json",
		"-shards", "2", "-workers-listen", wl[0]}, strings.Fields(testArgs)...)
	moArgs = append(moArgs, dealerArgs(dl.coord[0], f.fp["dealer"])...)
	r.startMO = func(extra ...string) (*proc, string) {
		mo := f.start(t, "modelowner", append(slices.Clone(moArgs), extra...)...)
		mo.waitLine(t, "modelowner workers listening ")
		return mo, strings.TrimPrefix(mo.waitLine(t, "modelowner listening "), "modelowner listening ")
	}
	r.startDO = func(addr string, extra ...string) *proc {
		do := f.dataOwner(t, addr, dl.coord[1], append([]string{"-state", st[1], "-out", out + "1.json", "-shards", "2", "-workers-listen", wl[1]}, extra...)...)
		do.waitLine(t, "dataowner workers listening ")
		return do
	}
	var addr string
	r.mo, addr = r.startMO()
	r.do = r.startDO(addr)
	pairAddr := []string{freePort(t), freePort(t)}
	for p := range 2 {
		for k := range K {
			r.wstate[p] = append(r.wstate[p], filepath.Join(dir, fmt.Sprintf("w%d-%d", p, k)))
		}
	}
	r.start = func(p, k int) *proc {
		if p == 0 {
			args := []string{"-worker", "-cert", f.path("mo.crt"), "-key", f.path("mo.key"), "-peer-fingerprint", f.path("do.crt"),
				"-connect", pairAddr[k], "-coordinator", wl[0], "-shard-index", fmt.Sprint(k), "-state", r.wstate[0][k],
				"-connect-timeout", "20s", "-log", "warn"}
			return f.start(t, "modelowner", append(args, dealerArgs(dl.worker[0], f.fp["dealer"])...)...)
		}
		args := []string{"-worker", "-cert", f.path("do.crt"), "-key", f.path("do.key"), "-peer-fingerprint", f.fp["mo"],
			"-listen", pairAddr[k], "-coordinator", wl[1], "-shard-index", fmt.Sprint(k), "-state", r.wstate[1][k],
			"-pool", f.files.Pool, "-embedding", f.files.Checkpoint, "-connect-timeout", "20s", "-log", "warn"}
		return f.start(t, "dataowner", append(args, dealerArgs(dl.worker[1], f.path("dealer.crt"))...)...)
	}
	for p := range 2 {
		for k := range K {
			r.workers[p] = append(r.workers[p], r.start(p, k))
		}
	}
	return r
}

// all returns the run's processes.
func (r *shardedRun) all() []*proc {
	return append([]*proc{r.mo, r.do}, slices.Concat(r.workers[:]...)...)
}

// stderr returns every process's standard error.
func (r *shardedRun) stderr() string {
	var all strings.Builder
	for _, q := range r.all() {
		fmt.Fprintf(&all, "--- %s:\n%s", q.name, q.stderr)
	}
	return all.String()
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

// commonBatch returns a batch both workers of a pair have checkpointed ("").
func commonBatch(a, b map[string]string) string {
	for k := range a {
		if _, ok := b[k]; ok {
			return k
		}
	}
	return ""
}

// pairBatches returns the contents of the batch files that both workers
// of pair k have checkpointed, by their name in jobBatchFiles, each side's.
func (r *shardedRun) pairBatches(k int) map[string][2][]byte {
	out := map[string][2][]byte{}
	f0, f1 := jobBatchFiles(r.wstate[0][k], 0), jobBatchFiles(r.wstate[1][k], 1)
	for name, p0 := range f0 {
		p1, ok := f1[name]
		if !ok {
			continue
		}
		b0, err0 := os.ReadFile(p0)
		b1, err1 := os.ReadFile(p1)
		if err0 == nil && err1 == nil {
			out[name] = [2][]byte{b0, b1}
		}
	}
	return out
}

// coordBatches returns the shares of the batches party's coordinator has
// checkpointed in its state directory dir, by "phase-i/batch-g".
func coordBatches(t *testing.T, dir string, party int) map[string]selection.BatchShares {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("batches-p%d", party), "phase-*", "batch-*.bin"))
	out := map[string]selection.BatchShares{}
	for _, path := range m {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // being replaced: only finished files count
		}
		_, _, bs, err := selection.DecodeBatchFile(b)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out[filepath.Base(filepath.Dir(path))+"/"+filepath.Base(path)] = bs
	}
	return out
}

// workerJob is one job of a worker: its state directory's epoch (one per
// attempt, so a job sent again counts another) and its batches' shares.
type workerJob struct {
	dir    string
	epoch  uint64
	shares map[string]bool // fmt.Sprint of each batch's shares
}

// workerJobs returns the jobs the workers of party (state directories
// dirs) have checkpointed.
func workerJobs(t *testing.T, dirs []string, party int) []workerJob {
	t.Helper()
	var out []workerJob
	for _, dir := range dirs {
		jobs, _ := filepath.Glob(filepath.Join(dir, "job-*"))
		for _, jd := range jobs {
			b, err := os.ReadFile(selection.StateFile(jd, party))
			if err != nil {
				continue
			}
			st, err := selection.DecodeState(b)
			if err != nil {
				t.Fatalf("%s: %v", jd, err)
			}
			j := workerJob{dir: jd, epoch: st.Epoch, shares: map[string]bool{}}
			m, _ := filepath.Glob(filepath.Join(jd, fmt.Sprintf("batches-p%d", party), "phase-*", "batch-*.bin"))
			for _, path := range m {
				if b, err := os.ReadFile(path); err == nil {
					if _, _, bs, err := selection.DecodeBatchFile(b); err == nil {
						j.shares[fmt.Sprint(bs.Shares)] = true
					}
				}
			}
			out = append(out, j)
		}
	}
	return out
}

// recordedJobs returns the worker jobs of party whose every batch its
// coordinator has recorded (the coordinator records a shard's batches,
// the worker's shares, when the worker returns the whole shard), with
// their epochs; only the batches named in both are counted.
func recordedJobs(jobs []workerJob, coord map[string]selection.BatchShares, both map[string]bool) map[string]uint64 {
	out := map[string]uint64{}
	for _, j := range jobs {
		n := 0
		for name, bs := range coord {
			if both[name] && j.shares[fmt.Sprint(bs.Shares)] {
				n++
			}
		}
		if n > 0 && n == len(j.shares) {
			out[j.dir] = j.epoch
		}
	}
	return out
}

// TestShardedProcesses runs a selection sharded over K = 2 worker pairs,
// every party's coordinator and workers and a dealer per worker pair as OS
// processes on loopback, in the deployed topology (examples/k8s): worker k
// of each party dials dealer k through its -dealer 127.0.{shard}.1:PORT,
// the worker binary replacing {shard} by its index, the coordinators
// dealer 0 (pair 0's), each dealer with its own -seeds file; every dealer
// must have served both parties (checkServed). It selects what one pair selects from the same coin and
// proxies (up to fixed-point near-ties, compareRuns; the one pair, the
// reference, on its one dealer), and its purchase delivers, verifies and
// audits as an unsharded run's (checkPurchase: the coordinators hold the
// commitment). Then again, from the same coin:
//
//   - kill-worker: the model owner's worker 0 killed (SIGKILL) mid-phase,
//     once it and its peer have checkpointed a batch, and restarted by the
//     test: it resumes from its checkpoint, keeping every batch both
//     workers of the pair had finished (their files are unchanged: not
//     redone), and the run ends with the same result;
//   - kill-coordinator: the model owner's coordinator killed (SIGKILL)
//     mid-phase (its worker 1 held stopped meanwhile), once both
//     coordinators have recorded a shard's batches;
//     the data owner's coordinator fails with it, the test restarts both
//     with the same flags and state, the workers find them again and the
//     run ends with the same result, without sending again a shard both
//     coordinators had recorded (the restarted coordinators log one job
//     for phase 1, and the recorded shard's workers' job epochs are
//     unchanged: it was not run again).
func TestShardedProcesses(t *testing.T) {
	f := getFixture(t)
	dir := t.TempDir()
	rr := getRef(t, f) // one pair's run, its proxies the sharded runs'
	ref, ref0, ref1 := rr.res, rr.dirs[0], rr.dirs[1]

	for _, name := range []string{"clean", "kill-worker", "kill-coordinator"} {
		t.Run(name, func(t *testing.T) {
			// Each run starts from the reference's coin, so its sessions
			// are the reference's: a dealer refuses counters it served,
			// so each run gets fresh ones (as TestKillAndResume), one
			// per worker pair.
			dl := f.startPairDealers(t, dir, name, 2)
			defer dl.stop()
			start := time.Now()
			st := [2]string{filepath.Join(dir, name+"-mo"), filepath.Join(dir, name+"-do")}
			startFromCoin(t, [2]string{ref0, ref1}, st)
			out := filepath.Join(dir, name)
			r := f.sharded(t, filepath.Join(dir, name), dl, filepath.Join(ref0, "proxies"), st, out)
			deadline := time.Now().Add(60 * time.Second)
			switch name {
			case "kill-worker":
				for commonBatch(jobBatchFiles(r.wstate[0][0], 0), jobBatchFiles(r.wstate[1][0], 1)) == "" {
					if time.Now().After(deadline) {
						t.Fatalf("no worker batch checkpointed in 60 s; stderr:\n%s", r.stderr())
					}
					time.Sleep(2 * time.Millisecond)
				}
				// Every batch both workers of pair 0 hold now, both
				// finished before the kill: after the restart each must
				// still hold it as it was, kept, not redone with fresh
				// randomness. (Its epoch need not be 1: a pair's attempt
				// that fails after both counted an epoch, say a dealer
				// join refused, is retried in the next one.)
				kept := r.pairBatches(0)
				if err := r.workers[0][0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				r.workers[0][0].wait(t, 10*time.Second)
				epochs := map[uint64]int{}
				for _, b := range kept {
					_, _, bs, _ := selection.DecodeBatchFile(b[0])
					epochs[bs.Epoch]++
				}
				t.Logf("killed the model owner's worker 0 with %d batches checkpointed by both workers of its pair (batches by epoch: %v)", len(kept), epochs)
				if len(epochs) > 1 || epochs[1] == 0 {
					// Why a pair attempt failed before the kill.
					t.Logf("pair 0's workers before the kill:\n--- model owner's:\n%s--- data owner's:\n%s", r.workers[0][0].stderr, r.workers[1][0].stderr)
				}
				r.workers[0][0] = r.start(0, 0)
				defer func() {
					for name, b := range kept {
						for p, path := range []string{jobBatchFiles(r.wstate[0][0], 0)[name], jobBatchFiles(r.wstate[1][0], 1)[name]} {
							got, err := os.ReadFile(path)
							if err != nil {
								t.Errorf("party %d's batch %s, finished by both workers before the kill, is gone: %v", p, name, err)
								continue
							}
							if !bytes.Equal(got, b[p]) {
								_, _, was, _ := selection.DecodeBatchFile(b[p])
								_, _, now, _ := selection.DecodeBatchFile(got)
								t.Errorf("party %d's batch %s, finished by both workers before the kill (epoch %d), was redone (epoch %d)", p, name, was.Epoch, now.Epoch)
							}
						}
					}
				}()
			case "kill-coordinator":
				// The model owner's worker 1 is stopped (SIGSTOP) until
				// the kill, so that phase 1 cannot end before it: its
				// shard 2 is not recorded, and the coordinators are
				// mid-phase when one dies.
				if err := r.workers[0][1].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				// Wait until both coordinators have recorded a whole shard
				// (a worker job's result); the worker jobs whose every
				// batch both recorded are not to be sent again.
				var recorded [2]map[string]uint64
				var both map[string]bool
				for len(recorded[0]) == 0 || len(recorded[1]) == 0 {
					if time.Now().After(deadline) {
						t.Fatalf("no shard recorded by both coordinators in 60 s; stderr:\n%s", r.stderr())
					}
					time.Sleep(2 * time.Millisecond)
					c := [2]map[string]selection.BatchShares{coordBatches(t, st[0], 0), coordBatches(t, st[1], 1)}
					both = map[string]bool{}
					for name := range c[0] {
						if _, ok := c[1][name]; ok {
							both[name] = true
						}
					}
					if len(both) == 0 {
						continue
					}
					for p := range 2 {
						recorded[p] = recordedJobs(workerJobs(t, r.wstate[p], p), c[p], both)
					}
				}
				if err := r.mo.cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				r.mo.wait(t, 10*time.Second)
				if err := r.workers[0][1].cmd.Process.Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
				code := r.do.wait(t, 60*time.Second)
				t.Logf("killed the model owner's coordinator with %d batches recorded by both coordinators (%d and %d worker jobs whole); the data owner's exited %d",
					len(both), len(recorded[0]), len(recorded[1]), code)
				if code == 0 {
					t.Fatalf("the data owner's coordinator finished although the model owner's was killed; stderr:\n%s", r.do.stderr)
				}
				// Restarted at info level: they log the jobs they send.
				var addr string
				r.mo, addr = r.startMO("-log", "info")
				r.do = r.startDO(addr, "-log", "info")
				defer func() {
					// Phase 1's shard 2 (worker 1's, held stopped) is the
					// only one sent again: shard 1 was recorded by both.
					for _, c := range []*proc{r.mo, r.do} {
						m := regexp.MustCompile(`"selection: phase on worker pairs" party=\d phase=1 shards=2 jobs=(\d+)`).FindStringSubmatch(c.stderr.String())
						if m == nil || m[1] != "1" {
							t.Errorf("the restarted %s coordinator sent phase 1's jobs %v; want only the shard not recorded (jobs=1)", c.name, m)
						}
					}
					for p := range 2 {
						now := workerJobs(t, r.wstate[p], p)
						for _, j := range now {
							if e, ok := recorded[p][j.dir]; ok && j.epoch != e {
								t.Errorf("party %d: the job %s, recorded by both coordinators before the kill (epoch %d), was run again (epoch %d)", p, filepath.Base(j.dir), e, j.epoch)
							}
						}
					}
					if t.Failed() {
						t.Logf("stderr:\n%s", r.stderr())
					}
				}()
			}
			for _, p := range r.all() {
				if code := p.wait(t, 90*time.Second); code != 0 {
					t.Fatalf("%s exited %d; all stderr:\n%s", p.name, code, r.stderr())
				}
			}
			dl.checkServed(t)
			r0, r1 := readResult(t, out+"0.json"), readResult(t, out+"1.json")
			checkAgree(t, r0, r1)
			if !slices.Equal(r0.Bootstrap, ref.Bootstrap) {
				t.Fatalf("bootstrap %v, one pair's %v", r0.Bootstrap, ref.Bootstrap)
			}
			if name == "kill-coordinator" {
				resumed := 0
				for _, ph := range r0.Phases {
					resumed += ph.Resumed
				}
				if r0.Epoch < 2 || resumed == 0 {
					t.Errorf("the restarted coordinators resumed %d batches in epoch %d; want the recorded shard resumed", resumed, r0.Epoch)
				}
			}
			compareRuns(t, ref, r0, [2]string{ref0, ref1}, st)
			if name == "clean" {
				checkPurchase(t, f, st, r0, f.files.Pool, f.files.Checkpoint, "-proxies", filepath.Join(ref0, "proxies"))
			}
			t.Logf("sharded (%s): %v; selected %v (one pair: %v)", name, time.Since(start).Round(time.Millisecond), r0.Selected, ref.Selected)
		})
	}
}
