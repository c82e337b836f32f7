package main

// forward --per-party runs the dealer and the two parties of the forward
// benchmark as three child processes of this binary (the hidden subcommand
// forward-party), talking over loopback TLS with pinned keys as real
// deployments do, so that each one's peak memory can be measured apart:
//
//	mpcbench forward-party --role dealer|p0|p1 --dir DIR [bench flags] ...
//
// The parent writes the three identities into a temporary directory and
// passes the peers' fingerprints as flags. Each child prints JSON lines on
// stdout: first, for the dealer and party 0, {"listen": ...} with the
// addresses it listens on, then one partyReport.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/bench"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/syncbuf"
	"github.com/selectformer/selectformer/transport"
)

func init() {
	commands["forward-party"] = command{"(internal) one process of forward --per-party", runForwardParty}
}

// roles of the child processes, in start order.
var roles = []string{"dealer", "p0", "p1"}

// executable is the binary re-executed for the children.
var executable = os.Executable

// listenMsg is a child's first line when it listens: the dealer's two
// addresses (Dealer[0] for party 0, Dealer[1] for party 1) or party 0's.
type listenMsg struct {
	Dealer [2]string `json:"dealer,omitempty"`
	P0     string    `json:"p0,omitempty"`
}

// childLine is one line of a child's stdout.
type childLine struct {
	Listen *listenMsg   `json:"listen,omitempty"`
	Report *partyReport `json:"report,omitempty"`
}

// partyReport is a child's result.
type partyReport struct {
	Role string `json:"role"`
	// PeakHeap is the peak Go heap in use (bench.HeapInUse sampled every 20 ms).
	PeakHeap uint64 `json:"peak_heap"`
	// RSS is the process's peak resident set size (getrusage).
	RSS uint64 `json:"rss"`
	// CPUSeconds is the process's CPU time, user + system (select children).
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	// Party is the party's cost (forward parties only).
	Party *bench.ForwardParty `json:"party,omitempty"`
	// Select is the party's record of a sample selection and PhasePeaks
	// its peak Go heap per phase (select parties only).
	Select     *bench.PartyRun `json:"select,omitempty"`
	PhasePeaks []uint64        `json:"phase_peaks,omitempty"`
	// Dealer is what the dealer served (dealer only).
	Dealer *beaver.DealerStats `json:"dealer,omitempty"`
	// Procs is the child's GOMAXPROCS (select children): the CPUs it was
	// pinned to, where it was (select --two-hosts).
	Procs int `json:"procs,omitempty"`
}

// perPartyResult is the output of forward --per-party: bench.ForwardResult's fields (with
// peak_bytes the sum of the three processes' peaks) and each process's.
type perPartyResult struct {
	*bench.ForwardResult
	PeakBytesP0     uint64 `json:"peak_bytes_p0"`
	PeakBytesP1     uint64 `json:"peak_bytes_p1"`
	PeakBytesDealer uint64 `json:"peak_bytes_dealer"`
	RSSBytesP0      uint64 `json:"rss_bytes_p0"`
	RSSBytesP1      uint64 `json:"rss_bytes_p1"`
	RSSBytesDealer  uint64 `json:"rss_bytes_dealer"`
}

// child is a started child process.
type child struct {
	role   string
	cmd    *exec.Cmd
	lines  chan childLine
	stderr *syncbuf.Buffer
	done   chan struct{} // closed when the stdout reader ends
	err    error         // the reader's error, set before done closes
}

// next waits for the child's next stdout line.
func (c *child) next(ctx context.Context) (childLine, error) {
	select {
	case l, ok := <-c.lines:
		if ok {
			return l, nil
		}
		<-c.done
		err := c.err
		if err == nil {
			err = errors.New("exited without a report")
		}
		return childLine{}, fmt.Errorf("%s: %w; stderr:\n%s", c.role, err, c.stderr.String())
	case <-ctx.Done():
		return childLine{}, fmt.Errorf("%s: %w; stderr:\n%s", c.role, context.Cause(ctx), c.stderr.String())
	}
}

// spawn starts exe with args as the child of role and reads its stdout
// lines in the background.
func spawn(exe, role string, args []string) (*child, error) {
	return spawnPinned(exe, role, args, nil)
}

// spawnPinned is spawn with the child pinned to the CPUs cpus (none: not
// pinned).
func spawnPinned(exe, role string, args []string, cpus []int) (*child, error) {
	c := &child{role: role, cmd: exec.Command(exe, args...), lines: make(chan childLine, 4), stderr: &syncbuf.Buffer{Max: 1 << 20}, done: make(chan struct{})}
	c.cmd.Stderr = c.stderr
	setParentDeath(c.cmd)
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", role, err)
	}
	if err := startPinned(c.cmd, cpus); err != nil {
		return nil, fmt.Errorf("start %s: %w", role, err)
	}
	go func() {
		defer close(c.done)
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var l childLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				c.err = fmt.Errorf("bad output line %q: %w", sc.Text(), err)
				_ = c.cmd.Process.Kill()
				_ = c.cmd.Wait()
				return
			}
			c.lines <- l
		}
		if err := sc.Err(); err != nil {
			c.err = err
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
			return
		}
		if err := c.cmd.Wait(); err != nil {
			c.err = err
		}
	}()
	return c, nil
}

// killChildren kills children that have not exited and waits (a while) for
// their readers to reap them.
func killChildren(children []*child) {
	for _, c := range children {
		_ = c.cmd.Process.Kill()
		select { // the reader reaps the child once its stdout closes
		case <-c.done:
		case <-time.After(10 * time.Second):
		}
	}
}

func runPerParty(ctx context.Context, bf *benchFlags, cfg bench.ForwardConfig, timeout time.Duration, asJSON bool, stdout, stderr io.Writer) error {
	exe, err := executable()
	if err != nil {
		return fmt.Errorf("forward: per-party: %w", err)
	}
	dir, err := os.MkdirTemp("", "mpcbench-")
	if err != nil {
		return fmt.Errorf("forward: per-party: %w", err)
	}
	defer os.RemoveAll(dir)
	fps := map[string]string{}
	for _, r := range roles {
		id, err := transport.GenerateIdentity("mpcbench-" + r)
		if err != nil {
			return fmt.Errorf("forward: per-party: %w", err)
		}
		if err := id.Save(filepath.Join(dir, r+".crt"), filepath.Join(dir, r+".key")); err != nil {
			return fmt.Errorf("forward: per-party: %w", err)
		}
		fps[r] = id.Fingerprint()
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("timed out after %v", timeout))
	defer cancel()
	var children []*child
	// Normally the children have exited; on failure, kill them.
	defer func() { killChildren(children) }()
	// The parent drives both parties, so it draws their dealer session id.
	sid, err := beaver.NewSessionID()
	if err != nil {
		return fmt.Errorf("forward: per-party: %w", err)
	}
	start := func(role string, extra ...string) (*child, error) {
		args := append([]string{"forward-party", "--role", role, "--dir", dir, "--timeout", timeout.String(),
			"--fp-dealer", fps["dealer"], "--fp-p0", fps["p0"], "--fp-p1", fps["p1"], "--session", sid.String()}, extra...)
		c, err := spawn(exe, role, append(args, bf.args()...))
		if err != nil {
			return nil, fmt.Errorf("forward: per-party: %w", err)
		}
		children = append(children, c)
		return c, nil
	}
	listen := func(c *child) (*listenMsg, error) {
		l, err := c.next(ctx)
		if err != nil {
			return nil, fmt.Errorf("forward: per-party: %w", err)
		}
		if l.Listen == nil {
			return nil, fmt.Errorf("forward: per-party: %s: no listen line", c.role)
		}
		return l.Listen, nil
	}
	dealer, err := start("dealer")
	if err != nil {
		return err
	}
	dl, err := listen(dealer)
	if err != nil {
		return err
	}
	p0, err := start("p0", "--dealer", dl.Dealer[0])
	if err != nil {
		return err
	}
	pl, err := listen(p0)
	if err != nil {
		return err
	}
	p1, err := start("p1", "--dealer", dl.Dealer[1], "--peer", pl.P0)
	if err != nil {
		return err
	}
	// Wait for the parties first (a party's failure ends the dealer's wait).
	var reps [3]*partyReport
	for i, c := range []*child{p0, p1, dealer} {
		l, err := c.next(ctx)
		if err != nil {
			return fmt.Errorf("forward: per-party: %w", err)
		}
		if l.Report == nil || l.Report.Role != c.role || (c.role != "dealer" && l.Report.Party == nil) {
			return fmt.Errorf("forward: per-party: %s: bad report", c.role)
		}
		reps[i] = l.Report
	}
	for _, c := range children {
		select {
		case <-c.done:
			if c.err != nil {
				return fmt.Errorf("forward: per-party: %s: %w; stderr:\n%s", c.role, c.err, c.stderr.String())
			}
		case <-ctx.Done():
			return fmt.Errorf("forward: per-party: waiting for %s to exit: %w", c.role, context.Cause(ctx))
		}
	}
	children = nil
	res, err := bench.NewForwardResult(cfg, [2]bench.ForwardParty{*reps[0].Party, *reps[1].Party})
	if err != nil {
		return fmt.Errorf("forward: per-party: %w", err)
	}
	if r0, r1 := reps[0].Party.Forward.Stream.Rounds, reps[1].Party.Forward.Stream.Rounds; r0 != r1 {
		return fmt.Errorf("forward: per-party: parties disagree on rounds: %d and %d", r0, r1)
	}
	res.PeakBytes = reps[0].PeakHeap + reps[1].PeakHeap + reps[2].PeakHeap
	out := perPartyResult{ForwardResult: res,
		PeakBytesP0: reps[0].PeakHeap, PeakBytesP1: reps[1].PeakHeap, PeakBytesDealer: reps[2].PeakHeap,
		RSSBytesP0: reps[0].RSS, RSSBytesP1: reps[1].RSS, RSSBytesDealer: reps[2].RSS}
	if asJSON {
		return json.NewEncoder(stdout).Encode(out)
	}
	printForward(stdout, res)
	fmt.Fprintf(stdout, "peak heap: p0 %d B, p1 %d B, dealer %d B; peak RSS: p0 %d B, p1 %d B, dealer %d B\n",
		out.PeakBytesP0, out.PeakBytesP1, out.PeakBytesDealer, out.RSSBytesP0, out.RSSBytesP1, out.RSSBytesDealer)
	return nil
}

// runForwardParty is one child of forward --per-party.
func runForwardParty(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("forward-party", stderr)
	cf := addChildFlags(fs, "party 0's address (for p1)")
	timeout := fs.Duration("timeout", time.Hour, "give up after this long")
	session := fs.String("session", "", "the dealer session id both parties present (64 hex digits, drawn by the parent)")
	bf := addBenchFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := bf.config()
	if err != nil {
		return fmt.Errorf("forward-party: %w", err)
	}
	id, fp, err := cf.identity()
	if err != nil {
		return fmt.Errorf("forward-party: %w", err)
	}
	role, dealerAddr, peerAddr := cf.role, cf.dealer, cf.peer
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	// Sample the heap for the whole life of the process.
	var peak atomic.Uint64
	sample := func() {
		if v := bench.HeapInUse(); v > peak.Load() {
			peak.Store(v)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			sample()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	enc := json.NewEncoder(stdout)
	rep := &partyReport{Role: *role}
	switch *role {
	case "dealer":
		rep.Dealer, err = serveDealer(ctx, id, fp, enc)
	default:
		var sid beaver.SessionID
		if sid, err = beaver.ParseSessionID(*session); err != nil {
			return fmt.Errorf("forward-party: %w", err)
		}
		rep.Party, err = runParty(ctx, *role, id, fp, cfg, *dealerAddr, *peerAddr, sid, enc)
	}
	close(stop)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("forward-party %s: %w", *role, err)
	}
	sample()
	rep.PeakHeap = peak.Load()
	if rep.RSS, err = peakRSS(); err != nil {
		return fmt.Errorf("forward-party %s: %w", *role, err)
	}
	return enc.Encode(childLine{Report: rep})
}

// serveDealer serves both parties' sessions (each draws the dealer words
// of its own kinds) on two loopback listeners and returns what it served
// once both have hung up.
func serveDealer(ctx context.Context, id *transport.Identity, fp map[string]string, enc *json.Encoder) (*beaver.DealerStats, error) {
	srv, err := dealer.NewServer(dealer.ServerOptions{})
	if err != nil {
		return nil, err
	}
	var lns [2]*transport.Listener
	for p := range lns {
		if lns[p], err = transport.Listen("127.0.0.1:0", id, srv.ConnOptions(transport.Options{})); err != nil {
			return nil, err
		}
		defer lns[p].Close()
	}
	if err := enc.Encode(childLine{Listen: &listenMsg{Dealer: [2]string{lns[0].Addr().String(), lns[1].Addr().String()}}}); err != nil {
		return nil, err
	}
	// Both parties are served at once: the dealer pairs their session ids.
	c0, err := lns[0].Accept(ctx, fp["p0"])
	if err != nil {
		return nil, fmt.Errorf("accept p0: %w", err)
	}
	err0 := make(chan error, 1)
	go func() {
		defer c0.Close()
		err0 <- srv.Serve(ctx, c0, 0)
	}()
	c1, err := lns[1].Accept(ctx, fp["p1"])
	if err != nil {
		return nil, fmt.Errorf("accept p1: %w", err)
	}
	err = srv.Serve(ctx, c1, 1)
	_ = c1.Close()
	err0v := <-err0
	// Each party's session ends when it hangs up (an error from Serve); a
	// protocol violation also makes that party fail, which the parent
	// reports.
	if ctx.Err() != nil {
		return nil, fmt.Errorf("serve p0: %v; p1: %w", err0v, err)
	}
	st := srv.Stats()
	return &st, nil
}

// runParty connects to the dealer and the other party and runs the party's
// side of the benchmark.
func runParty(ctx context.Context, role string, id *transport.Identity, fp map[string]string, cfg bench.ForwardConfig,
	dealerAddr, peerAddr string, session beaver.SessionID, enc *json.Encoder) (*bench.ForwardParty, error) {
	party := 0
	if role == "p1" {
		party = 1
	}
	opt := transport.Options{Link: cfg.Link}
	var ln *transport.Listener
	if party == 0 {
		var err error
		if ln, err = transport.Listen("127.0.0.1:0", id, opt); err != nil {
			return nil, err
		}
		defer ln.Close()
		if err := enc.Encode(childLine{Listen: &listenMsg{P0: ln.Addr().String()}}); err != nil {
			return nil, err
		}
	}
	dc, err := transport.Dial(ctx, dealerAddr, id, fp["dealer"], transport.Options{})
	if err != nil {
		return nil, fmt.Errorf("dial dealer: %w", err)
	}
	defer dc.Close()
	prov, err := dealer.Connect(ctx, dc, party)
	if err != nil {
		return nil, err
	}
	if err := prov.BindSession(ctx, session); err != nil {
		return nil, err
	}
	var pc *transport.Conn
	if party == 0 {
		pc, err = ln.Accept(ctx, fp["p1"])
	} else {
		pc, err = transport.Dial(ctx, peerAddr, id, fp["p0"], opt)
	}
	if err != nil {
		return nil, fmt.Errorf("connect to the other party: %w", err)
	}
	defer pc.Close()
	s, err := protocol.NewSession(ctx, party, pc.Stream(1), prov, share.DefaultFixedPoint)
	if err != nil {
		return nil, err
	}
	res, err := bench.RunForwardParty(ctx, s, cfg)
	if err != nil {
		return nil, err
	}
	// Both parties are done once each has the other's last message; a
	// final exchange keeps party 0 from closing while party 1 still reads.
	if err := s.Exchange(ctx, []uint64{1}, make([]uint64, 1)); err != nil {
		return nil, fmt.Errorf("closing exchange: %w", err)
	}
	if party == 0 { // let party 1 hang up first
		select {
		case <-pc.Done():
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for party 1 to hang up: %w", ctx.Err())
		case <-time.After(10 * time.Second):
		}
	}
	return res, nil
}

// childFlags are the flags of every child process of mpcbench (the dealer or
// a party of forward --per-party and select --processes): its role, the
// directory of the identities, the three pinned fingerprints and the
// addresses it dials.
type childFlags struct {
	role, dir, dealer, peer *string
	fps                     [3]*string
}

// addChildFlags defines the child flags on fs; peerHelp describes -peer.
func addChildFlags(fs *flag.FlagSet, peerHelp string) *childFlags {
	c := &childFlags{
		role: fs.String("role", "", "dealer, p0 or p1"),
		dir:  fs.String("dir", "", "directory of the identities (ROLE.crt, ROLE.key)"),
	}
	for i, r := range roles {
		c.fps[i] = fs.String("fp-"+r, "", "fingerprint of "+r)
	}
	c.dealer = fs.String("dealer", "", "the dealer's address for this party")
	c.peer = fs.String("peer", "", peerHelp)
	return c
}

// identity checks the role and returns the child's identity and the pinned
// fingerprint of each role.
func (c *childFlags) identity() (*transport.Identity, map[string]string, error) {
	role := *c.role
	if role != "dealer" && role != "p0" && role != "p1" {
		return nil, nil, fmt.Errorf("role %q, want dealer, p0 or p1", role)
	}
	id, err := transport.LoadIdentity(filepath.Join(*c.dir, role+".crt"), filepath.Join(*c.dir, role+".key"))
	if err != nil {
		return nil, nil, err
	}
	fp := map[string]string{}
	for i, r := range roles {
		fp[r] = *c.fps[i]
	}
	return id, fp, nil
}
