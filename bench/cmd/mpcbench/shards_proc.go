package main

// The measured sharded run (select --shards K --processes): the peer
// binaries (examples/dealer, modelowner, dataowner, quickstart) built once,
// the quickstart's MNIST demo exported as their files, one run generating
// the proxies (unshaped, not timed), then the selection from those proxies
// on 1 pair and on 2, 4, ... K worker pairs per party as OS processes on
// loopback: the coordinators' link and every worker pair's link each
// through its own relay of the selection's link (bench.Relay), and one
// dealer per worker pair (the deployed topology, examples/k8s: worker k
// dials dealer k, the coordinators dealer 0, each dealer with its default
// -max-conns) on unshaped loopback.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/selectformer/selectformer/bench"
	"github.com/selectformer/selectformer/testharness/syncbuf"
	"github.com/selectformer/selectformer/transport"
)

// shardDemo is the demo selection of a measured sharded run: Pool
// candidates of the quickstart's MNIST demo, Bootstrap labelled, Budget
// selected, in two phases (half the candidates survive the first) of
// batches of 16, so that every shard of K ≤ 4 pairs holds batches.
type shardDemo struct {
	Pool, Budget, Bootstrap int
}

// The demos of the measured run: the command's, and the test's (small).
var (
	shardDemoRun  = shardDemo{Pool: 600, Budget: 160, Bootstrap: 100}
	shardDemoTest = shardDemo{Pool: 120, Budget: 40, Bootstrap: 20}
)

// params are the selection flags of both parties.
func (d shardDemo) params() []string {
	return []string{"-budget", strconv.Itoa(d.Budget), "-bootstrap", strconv.Itoa(d.Bootstrap),
		"-schedule", "1:2:4@0.5,2:2:8", "-batch", "16", "-workers", "2", "-appraisal", "mean"}
}

func (d shardDemo) String() string { return strings.Join(d.params(), " ") }

// shardMeasurement is one measured run of the peer binaries.
type shardMeasurement struct {
	Shards     int
	Wall       time.Duration // start of the parties to both coordinators' exit
	CPU        time.Duration // user + system time of every process of the run
	Selected   int
	Phases     []runPhase // the model owner's coordinator's
	Processes  int
	LinkRelays int
}

// peerKit is the built peer binaries and the exported demo.
type peerKit struct {
	demo               shardDemo
	bin, dir           string
	pool, labels, ckpt string    // the demo's files
	mo, do, dealer     [2]string // cert, key
	log                *slog.Logger
	deadline           time.Duration // of one run
	relays             sync.WaitGroup
	link               transport.Profile
	logDir             string // each process's log, at -log info ("": none, -log warn)
}

// logLevel is the peer processes' -log level.
func (k *peerKit) logLevel() string {
	if k.logDir != "" {
		return "info"
	}
	return "warn"
}

// peerRole names the i-th process of a run on shards worker pairs (the
// order of run's processes: dealer 0, the coordinators, the workers, the
// dealers of pairs 1 .. shards−1).
func peerRole(i, shards int) string {
	switch i {
	case 0:
		return "dealer"
	case 1:
		return "modelowner"
	case 2:
		return "dataowner"
	}
	if shards > 1 && i >= 3+2*shards {
		return fmt.Sprintf("dealer%d", i-3-2*shards+1)
	}
	side := "modelowner"
	if (i-3)%2 == 1 {
		side = "dataowner"
	}
	return fmt.Sprintf("worker%d-%s", (i-3)/2, side)
}

// saveLogs writes each process's log of run name (on shards worker pairs)
// to the kit's log directory, if it has one.
func (k *peerKit) saveLogs(name string, shards int, procs []*peerProc) {
	if k.logDir == "" {
		return
	}
	for i, p := range procs {
		path := filepath.Join(k.logDir, fmt.Sprintf("%s-%02d-%s.log", name, i, peerRole(i, shards)))
		if err := os.WriteFile(path, []byte(p.stderr.String()), 0o644); err != nil {
			k.log.Warn("peer log", "path", path, "err", err)
		}
	}
}

// moduleRoot returns the directory of the module's go.mod (the peer
// binaries are built from its source).
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD (run mpcbench from the selectformer module, with the go tool on PATH): %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the selectformer module: run mpcbench --processes --shards from the repository")
	}
	return filepath.Dir(mod), nil
}

// peerOptions are the measured sharded run's choices of binaries and logs.
type peerOptions struct {
	Bin  string // prebuilt peer binaries ("": build them with the go tool)
	Logs string // where each process's log goes, at -log info ("": nowhere, -log warn)
}

// peerBinaries are the binaries a measured sharded run starts.
var peerBinaries = []string{"quickstart", "dealer", "modelowner", "dataowner", "mkpool"}

// newPeerKit builds the binaries into dir (or, with peerBin set, uses the
// prebuilt ones there: a host without the go tool) and exports the demo.
func newPeerKit(ctx context.Context, dir string, demo shardDemo, opts peerOptions, link transport.Profile, log *slog.Logger) (*peerKit, error) {
	k := &peerKit{demo: demo, bin: filepath.Join(dir, "bin"), dir: filepath.Join(dir, "demo"), link: link, log: log, deadline: 10 * time.Minute,
		logDir: opts.Logs}
	if k.logDir != "" {
		if err := os.MkdirAll(k.logDir, 0o755); err != nil {
			return nil, fmt.Errorf("--peer-logs: %w", err)
		}
	}
	peerBin := opts.Bin
	if peerBin != "" {
		abs, err := filepath.Abs(peerBin)
		if err != nil {
			return nil, fmt.Errorf("--peer-bin: %w", err)
		}
		for _, name := range peerBinaries {
			if fi, err := os.Stat(filepath.Join(abs, name)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return nil, fmt.Errorf("--peer-bin %s: want an executable %s there (go build -o DIR/ ./examples/quickstart ./examples/dealer ./examples/modelowner ./examples/dataowner ./examples/mkpool)", peerBin, name)
			}
		}
		k.bin = abs
	} else {
		root, err := moduleRoot(ctx)
		if err != nil {
			return nil, err
		}
		args := []string{"build", "-o", k.bin + string(filepath.Separator)}
		for _, name := range peerBinaries {
			args = append(args, "./examples/"+name)
		}
		build := exec.CommandContext(ctx, "go", args...)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building the peer binaries: %w\n%s", err, out)
		}
	}
	out, err := exec.CommandContext(ctx, filepath.Join(k.bin, "quickstart"), "-export", k.dir, "-pool", strconv.Itoa(demo.Pool), "-epochs", "2",
		"-budget", strconv.Itoa(demo.Budget), "-bootstrap", strconv.Itoa(demo.Bootstrap)).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, fmt.Errorf("quickstart -export: %w", err)
	}
	// The export writes the data owner's images for mkpool and prints
	// the mkpool command that builds its pool; the labeller's answers are
	// every candidate's class, one a line: -labels' format.
	mk, err := exportedMkpool(string(out))
	if err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, filepath.Join(k.bin, "mkpool"), mk.args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mkpool %s: %w\n%s", strings.Join(mk.args, " "), err, out)
	}
	k.pool, k.labels, k.ckpt = mk.out, filepath.Join(k.dir, "answers.txt"), mk.embedding
	for _, p := range []struct {
		dst  *[2]string
		name string
	}{{&k.mo, "modelowner"}, {&k.do, "dataowner"}, {&k.dealer, "dealer"}} {
		*p.dst = [2]string{filepath.Join(k.dir, p.name+".crt"), filepath.Join(k.dir, p.name+".key")}
	}
	return k, nil
}

// mkpoolCommand is the mkpool command quickstart -export printed.
type mkpoolCommand struct {
	args           []string // after "mkpool"
	out, embedding string   // its -out and -embedding
}

// exportedMkpool finds the mkpool command in quickstart -export's
// output: a line "go run ./examples/mkpool ARGS", its words unquoted (the
// export quotes only words a shell would split, none under mpcbench's
// temporary directory), with -out and -embedding.
func exportedMkpool(out string) (mkpoolCommand, error) {
	for _, l := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(l, "go run ./examples/mkpool ")
		if !ok {
			continue
		}
		c := mkpoolCommand{args: strings.Fields(rest)}
		for i, a := range c.args {
			switch {
			case strings.ContainsAny(a, `'"\`):
				return c, fmt.Errorf("quickstart -export printed %q: a quoted word", l)
			case i+1 < len(c.args) && a == "-out":
				c.out = c.args[i+1]
			case i+1 < len(c.args) && a == "-embedding":
				c.embedding = c.args[i+1]
			}
		}
		if c.out == "" || c.embedding == "" {
			return c, fmt.Errorf("quickstart -export printed %q: want -out and -embedding", l)
		}
		return c, nil
	}
	return mkpoolCommand{}, fmt.Errorf("quickstart -export printed no mkpool command: %q", firstLine(out))
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// peerProc is a running peer binary.
type peerProc struct {
	name   string
	cmd    *exec.Cmd
	lines  chan string
	stderr *syncbuf.Buffer
	done   chan struct{}
	err    error
}

// start starts a binary of the kit; it is killed when ctx ends.
func (k *peerKit) start(ctx context.Context, name string, args ...string) (*peerProc, error) {
	p := &peerProc{name: name, cmd: exec.CommandContext(ctx, filepath.Join(k.bin, name), args...), lines: make(chan string, 16),
		stderr: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd.Stderr = p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitLine returns what follows prefix on the first stdout line that
// starts with it.
func (p *peerProc) waitLine(ctx context.Context, prefix string) (string, error) {
	for {
		select {
		case l := <-p.lines:
			if s, ok := strings.CutPrefix(l, prefix); ok {
				return s, nil
			}
		case <-p.done:
			return "", fmt.Errorf("%s exited before printing %q: %v; stderr:\n%s", p.name, prefix, p.err, p.stderr)
		case <-ctx.Done():
			return "", fmt.Errorf("%s printed no %q line: %w", p.name, prefix, ctx.Err())
		}
	}
}

// wait waits for the process to exit and returns its error.
func (p *peerProc) wait(ctx context.Context) error {
	select {
	case <-p.done:
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", p.name, ctx.Err())
	}
	if p.err != nil {
		return fmt.Errorf("%s: %w; stderr:\n%s", p.name, p.err, p.stderr)
	}
	return nil
}

func (p *peerProc) cpu() time.Duration {
	if st := p.cmd.ProcessState; st != nil {
		return st.UserTime() + st.SystemTime()
	}
	return 0
}

// relay starts a relay of the kit's link in front of target and returns
// its address; it runs until ctx ends.
func (k *peerKit) relay(ctx context.Context, target string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	k.relays.Add(1)
	go func() {
		defer k.relays.Done()
		if err := bench.Relay(ctx, ln, target, k.link, k.log); err != nil {
			k.log.Warn("relay", "target", target, "err", err)
		}
	}()
	return ln.Addr().String(), nil
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (k *peerKit) dealerArgs(addr string) []string {
	return []string{"-dealer", addr, "-dealer-fingerprint", k.dealer[0]}
}

// run runs one selection: generation (proxies "": the model owner
// generates the proxies into its state, over an unshaped link) or from
// proxies on shards worker pairs (1: today's one pair), and measures it.
func (k *peerKit) run(ctx context.Context, name, proxies string, shards int) (*shardMeasurement, error) {
	ctx, cancel := context.WithTimeout(ctx, k.deadline)
	defer cancel()
	rctx, stopRelays := context.WithCancel(ctx)
	defer k.relays.Wait()
	defer stopRelays()
	dir := filepath.Join(k.dir, name)
	// One dealer per worker pair (one for one pair): dealer i serves pair
	// i, and dealer 0 the coordinators too. Dealer 0 is the run's first
	// process, the others its last (peerRole).
	var procs, dealers []*peerProc
	defer func() {
		all := append(append([]*peerProc(nil), procs...), dealers[min(1, len(dealers)):]...)
		for _, p := range all {
			_ = p.cmd.Process.Kill()
		}
		for _, p := range all {
			<-p.done
		}
		k.saveLogs(name, shards, all)
	}()
	var dp0, dp1 []string // each dealer's address for party 0 and party 1
	for i := range max(1, shards) {
		dl, err := k.start(ctx, "dealer", "-cert", k.dealer[0], "-key", k.dealer[1], "-listen-p0", "127.0.0.1:0", "-listen-p1", "127.0.0.1:0",
			"-p0-fingerprint", k.mo[0], "-p1-fingerprint", k.do[0], "-log", k.logLevel())
		if err != nil {
			return nil, err
		}
		dealers = append(dealers, dl)
		if i == 0 {
			procs = append(procs, dl)
		}
		l, err := dl.waitLine(ctx, "dealer listening ")
		if err != nil {
			return nil, err
		}
		var a0, a1 string
		if _, err := fmt.Sscanf(l, "p0=%s p1=%s", &a0, &a1); err != nil {
			return nil, fmt.Errorf("dealer printed %q: %w", l, err)
		}
		dp0, dp1 = append(dp0, a0), append(dp1, a1)
	}
	d0, d1 := dp0[0], dp1[0] // the coordinators' (pair 0's)
	params := k.demo.params()
	m := &shardMeasurement{Shards: shards}
	start := time.Now()
	moArgs := append([]string{"-cert", k.mo[0], "-key", k.mo[1], "-listen", "127.0.0.1:0", "-peer-fingerprint", k.do[0],
		"-pool-size", strconv.Itoa(k.demo.Pool), "-connect-timeout", "60s", "-log", k.logLevel(), "-state", filepath.Join(dir, "mo"),
		"-out", filepath.Join(dir, "mo.json")}, params...)
	if proxies == "" {
		moArgs = append(moArgs, "-model", k.ckpt, "-labels", k.labels, "-mlp-points", "4000")
	} else {
		moArgs = append(moArgs, "-proxies", proxies)
	}
	if shards > 1 {
		moArgs = append(moArgs, "-shards", strconv.Itoa(shards), "-workers-listen", "127.0.0.1:0")
	}
	mo, err := k.start(ctx, "modelowner", append(moArgs, k.dealerArgs(d0)...)...)
	if err != nil {
		return nil, err
	}
	procs = append(procs, mo)
	var moWorkers string
	if shards > 1 {
		if moWorkers, err = mo.waitLine(ctx, "modelowner workers listening "); err != nil {
			return nil, err
		}
	}
	moAddr, err := mo.waitLine(ctx, "modelowner listening ")
	if err != nil {
		return nil, err
	}
	if proxies != "" {
		if moAddr, err = k.relay(rctx, moAddr); err != nil {
			return nil, err
		}
		m.LinkRelays++
	}
	doArgs := append([]string{"-cert", k.do[0], "-key", k.do[1], "-connect", moAddr, "-peer-fingerprint", k.mo[0],
		"-pool", k.pool, "-embedding", k.ckpt, "-connect-timeout", "60s", "-log", k.logLevel(), "-state", filepath.Join(dir, "do"),
		"-out", filepath.Join(dir, "do.json")}, params...)
	if shards > 1 {
		doArgs = append(doArgs, "-shards", strconv.Itoa(shards), "-workers-listen", "127.0.0.1:0")
	}
	do, err := k.start(ctx, "dataowner", append(doArgs, k.dealerArgs(d1)...)...)
	if err != nil {
		return nil, err
	}
	procs = append(procs, do)
	if shards > 1 {
		doWorkers, err := do.waitLine(ctx, "dataowner workers listening ")
		if err != nil {
			return nil, err
		}
		for i := range shards {
			pair, err := freeAddr()
			if err != nil {
				return nil, err
			}
			via, err := k.relay(rctx, pair)
			if err != nil {
				return nil, err
			}
			m.LinkRelays++
			ws := filepath.Join(dir, fmt.Sprintf("worker-%d", i))
			w0, err := k.start(ctx, "modelowner", append([]string{"-worker", "-cert", k.mo[0], "-key", k.mo[1], "-peer-fingerprint", k.do[0],
				"-connect", via, "-coordinator", moWorkers, "-shard-index", strconv.Itoa(i), "-state", ws + "-mo",
				"-connect-timeout", "60s", "-log", k.logLevel()}, k.dealerArgs(dp0[i])...)...)
			if err != nil {
				return nil, err
			}
			procs = append(procs, w0)
			w1, err := k.start(ctx, "dataowner", append([]string{"-worker", "-cert", k.do[0], "-key", k.do[1], "-peer-fingerprint", k.mo[0],
				"-listen", pair, "-coordinator", doWorkers, "-shard-index", strconv.Itoa(i), "-state", ws + "-do",
				"-pool", k.pool, "-embedding", k.ckpt, "-connect-timeout", "60s", "-log", k.logLevel()}, k.dealerArgs(dp1[i])...)...)
			if err != nil {
				return nil, err
			}
			procs = append(procs, w1)
		}
	}
	// Both coordinators and every worker end with the selection.
	for _, p := range procs[1:] {
		if err := p.wait(ctx); err != nil {
			return nil, fmt.Errorf("%s run: %w", name, err)
		}
	}
	m.Wall = time.Since(start)
	for _, dl := range dealers {
		_ = dl.cmd.Process.Signal(os.Interrupt)
	}
	for _, dl := range dealers {
		select {
		case <-dl.done:
		case <-time.After(5 * time.Second):
			_ = dl.cmd.Process.Kill()
			<-dl.done
		}
	}
	for _, p := range procs {
		m.CPU += p.cpu()
	}
	for _, dl := range dealers[1:] {
		m.CPU += dl.cpu()
	}
	m.Processes = len(procs) + len(dealers) - 1
	if m.Selected, m.Phases, err = readRunResult(filepath.Join(dir, "mo.json")); err != nil {
		return nil, err
	}
	return m, nil
}

// runPhase is what a measured run's result says of one phase.
type runPhase struct {
	Seconds      float64 `json:"seconds"`
	Batches      int     `json:"batches"`
	SelectRounds int64   `json:"select_rounds"`
}

// readRunResult reads a party's result file (selection.Result as JSON,
// at most 16 MiB): how many candidates it selected and its phases.
func readRunResult(path string) (selected int, phases []runPhase, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, fmt.Errorf("result: %w", err)
	}
	defer f.Close()
	var r struct {
		Selected []int      `json:"selected"`
		Phases   []runPhase `json:"phases"`
	}
	if err := json.NewDecoder(io.LimitReader(f, 16<<20)).Decode(&r); err != nil {
		return 0, nil, fmt.Errorf("result %s: %w", path, err)
	}
	return len(r.Selected), r.Phases, nil
}

// projectFromOnePair projects the one-pair run one to shards pairs by
// bench.ProjectShards's model, applied to the measured phases: the time
// outside the phases (start, handshakes, proxies, appraisal) unchanged;
// in each phase, QuickSelect at the full size on the coordinators' link
// (its rounds times the round trip rtt) unchanged, and the rest (the
// forward) paced by the largest shard, ⌈batches ÷ shards⌉ of the phase's
// batches.
func projectFromOnePair(one *shardMeasurement, shards int, rtt time.Duration) float64 {
	t := one.Wall.Seconds()
	for _, p := range one.Phases {
		t -= p.Seconds
	}
	for _, p := range one.Phases {
		topk := min(p.Seconds, float64(p.SelectRounds)*rtt.Seconds())
		fwd := p.Seconds - topk
		if p.Batches > 0 {
			largest := (p.Batches + shards - 1) / shards
			fwd *= float64(largest) / float64(p.Batches)
		}
		t += topk + fwd
	}
	return t
}
