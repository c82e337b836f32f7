// Package party holds the selection-specific parts shared by the modelowner
// and dataowner binaries and the quickstart: the public-parameter flags, the
// conversion of a schedule flag into selection parameters, the mapping of
// selection errors to exit codes, and the result file.
package party

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/internal/atomicfile"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/selection"
)

// DefaultSchedule is the schedule of the examples: a 2-layer proxy with MLP
// width 8 keeps 40% of the candidates, then a 2-layer proxy with width 16
// picks the budget. The first phase has two layers because a one-layer
// proxy of the examples' 2-layer ViT ranked the pool too unlike the target
// (bench/QUALITY.md, MNIST: Spearman 0.55–0.58 against 0.66, and it
// discarded a fifth of what the target would buy); it costs 87 rounds a
// batch instead of 56 and about 2.8 times the first phase's traffic.
const DefaultSchedule = "2:4:8@0.4,2:4:16"

// ParamFlags are the public parameters both parties must pass alike.
type ParamFlags struct {
	PoolSize  int
	Budget    int
	Bootstrap int
	Schedule  string
	Batch     int
	// Inflight is the number of batches in flight at once
	// (selection.Params.Workers).
	Inflight  int
	Appraisal string
	// Pipeline and MemoryBudget are this party's own choices (not
	// compared with the peer's).
	Pipeline     string
	MemoryBudget int64
}

// Register adds the flags to fs. withPool adds -pool-size (the data owner
// reads it from its pool file instead).
func (p *ParamFlags) Register(fs *flag.FlagSet, withPool bool) {
	if withPool {
		fs.IntVar(&p.PoolSize, "pool-size", 0, "number of candidates in the data owner's pool; required")
	}
	fs.IntVar(&p.Budget, "budget", 0, "points bought in total, bootstrap included; required")
	fs.IntVar(&p.Bootstrap, "bootstrap", 0, "size of the bootstrap sample (labelled by the model owner); required")
	fs.StringVar(&p.Schedule, "schedule", DefaultSchedule, "phases l:w:d@keep[/lanes] (layers, heads, MLP width, fraction kept, and optionally the phase's own batches in flight instead of -inflight's), comma-separated; the last phase keeps the budget")
	fs.IntVar(&p.Batch, "batch", 0, "candidates per secure forward batch (0: the library default)")
	fs.IntVar(&p.Inflight, "inflight", 0, "batches in flight at once, each on its own lane (0: the library default, 8); both parties pass the same value (not sharding's -workers-listen)")
	fs.Func("workers", "deprecated: the old name of -inflight", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return err
		}
		p.Inflight = n
		fmt.Fprintf(fs.Output(), "%s: -workers is deprecated: it is -inflight (batches in flight), not sharding's -shards/-worker\n", fs.Name())
		return nil
	})
	fs.StringVar(&p.Appraisal, "appraisal", "", "appraise the final set: \"\" (no), mean, threshold")
	fs.StringVar(&p.Pipeline, "pipeline", "on", "batch pipeline: on (all lanes at once, correlated randomness prefetched) or off (one batch at a time); this party's choice")
	fs.Int64Var(&p.MemoryBudget, "memory-budget", 0, "bytes of prefetched correlated randomness held at once (0: the library default, 1 GiB; negative: no prefetch); this party's choice")
}

// Params converts the flags into selection parameters; problems are usage
// errors.
func (p *ParamFlags) Params() (selection.Params, error) {
	sched, err := selection.ParseSchedule(p.Schedule)
	if err != nil {
		return selection.Params{}, peer.Usage("flag -schedule: %v", err)
	}
	if p.Budget <= 0 {
		return selection.Params{}, peer.Usage("flag -budget is required (a positive number of points)")
	}
	if p.Bootstrap <= 0 {
		return selection.Params{}, peer.Usage("flag -bootstrap is required (a positive number of points)")
	}
	if p.Batch < 0 || p.Inflight < 0 {
		return selection.Params{}, peer.Usage("flags -batch and -inflight must not be negative")
	}
	out := selection.Params{PoolSize: p.PoolSize, Budget: p.Budget, Bootstrap: p.Bootstrap, Schedule: sched,
		BatchSize: p.Batch, Workers: p.Inflight, Appraisal: selection.AppraisalMode(p.Appraisal),
		Pipeline: selection.PipelineMode(p.Pipeline), MemoryBudget: p.MemoryBudget}
	if err := out.Validate(); err != nil {
		return selection.Params{}, peer.Usage("%v", err)
	}
	return out, nil
}

// CheckSchedule checks the -schedule flag against a checkpoint (what names
// it in the message, e.g. "the target model in DIR"): every phase's proxy
// keeps at most the checkpoint's layers and heads per layer. It runs before
// any connection; a misfit is a usage error naming the phase (numbered from
// 1, as everywhere), its entry and the checkpoint's sizes.
func CheckSchedule(sched []selection.Phase, cfg model.Config, what string) error {
	for i, ph := range sched {
		s := ph.Proxy
		if s.Layers > cfg.Layers || s.Heads > cfg.Heads {
			return peer.Usage("flag -schedule: phase %d (%d:%d:%d) keeps l=%d layers of w=%d heads, but %s has %d layers of %d heads: use l ≤ %d and w ≤ %d",
				i+1, s.Layers, s.Heads, s.MLPHidden, s.Layers, s.Heads, what, cfg.Layers, cfg.Heads, cfg.Layers, cfg.Heads)
		}
	}
	return nil
}

// CheckProxies checks pre-generated proxies (-proxies DIR) against the
// schedule before any connection: a proxy whose shape is not its phase's is
// a usage error naming the phase and both shapes.
func CheckProxies(sched []selection.Phase, proxies []*proxy.Proxy, dir string) error {
	for i, ph := range sched {
		if i >= len(proxies) {
			break
		}
		want, got := ph.Proxy, proxies[i].Shape
		if want.Layers != 0 && want.Layers != got.Layers || want.Heads != 0 && want.Heads != got.Heads || want.MLPHidden != 0 && want.MLPHidden != got.MLPHidden {
			return peer.Usage("flag -schedule: phase %d is %d:%d:%d, but the proxy in %s is %d:%d:%d (pass the schedule the proxies were generated for)",
				i+1, want.Layers, want.Heads, want.MLPHidden, selection.ProxyDir(dir, i), got.Layers, got.Heads, got.MLPHidden)
		}
	}
	return nil
}

// CheckGenerate checks proxy generation settings (GenerateConfig) for the
// schedule of params and the target model before any connection, as the
// selection does before it sends anything; a refusal is a usage error.
func CheckGenerate(gen proxy.Config, params selection.Params, target *model.Model) error {
	gen.Phases = params.Shapes()
	if err := gen.Validate(target, params.Bootstrap); err != nil {
		return peer.Usage("proxy generation for -schedule %s: %v", selection.FormatSchedule(params.Schedule), err)
	}
	return nil
}

// GenerateConfig is the proxy generation used by the examples: the
// library's defaults (proxy.Config.WithDefaults: the measured-best
// generation, scaled to the bootstrap), distilling on the model owner's
// public inputs (-public; none: on the bootstrap alone); points, if
// positive, sets the size of each MLP training set.
func GenerateConfig(points int, seed uint64, public model.Input) proxy.Config {
	return proxy.Config{Points: max(points, 0), Seed: seed, Public: public}
}

// Classify maps an error of a selection run to an exit code: a handshake
// mismatch (*selection.MismatchError, FlagMismatch) is peer.ExitUsage (the
// two parties' flags differ: a configuration to fix, not a peer failure);
// the peer's abort and a refused second bootstrap are peer.ExitPeer; a
// corrupt, truncated or foreign checkpoint file (*selection.StateError,
// which names the file) is peer.ExitInput; coded errors keep their code;
// the rest is peer.ExitFailure.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var (
		mm *selection.MismatchError
		pa *selection.PeerAbortError
		se *selection.StateError
	)
	switch {
	case errors.As(err, &mm):
		var pe *peer.Error
		if errors.As(err, &pe) {
			return err
		}
		return peer.ConfigError(err)
	case errors.As(err, &pa), errors.Is(err, selection.ErrBootstrapRevealed):
		return peer.WithCode(peer.ExitPeer, err)
	case errors.As(err, &se):
		return peer.WithCode(peer.ExitInput, err)
	}
	return peer.WithCode(peer.Code(err), err)
}

// Stop is what a party binary needs to say how its run stopped.
type Stop struct {
	// Command is the binary's name (modelowner, dataowner).
	Command string
	// Party is 0 (model owner) or 1 (data owner).
	Party int
	// State is the -state directory ("" without one).
	State string
	// Dealer reports whether the party draws from a dealer, which may
	// have to be restarted too (a -once dealer exits when both parties are
	// gone).
	Dealer bool
	// DealerLost, if set, reports whether the party's connection to its
	// dealer died (the dealer stopped, or the link dropped).
	DealerLost func() bool
	// Prog says where the run was (Progress.Where).
	Prog *Progress
	// Log gets the error chain at Debug level.
	Log *slog.Logger
}

// rerun says exactly what to restart to resume: both parties with their
// -state (this one's named), and the dealer, when there is one: if it has
// exited, or (dealerGone) in any case; without -state, that a rerun
// starts over.
func (s Stop) rerun(dealerGone bool) string {
	if s.State == "" {
		return "no -state was given, so a rerun starts over (pass -state DIR to both parties to be able to resume)"
	}
	procs := "both parties"
	switch {
	case dealerGone:
		procs = "the dealer (with the same -seeds, if it had them), then both parties"
	case s.Dealer:
		procs = "the dealer if it has exited (a -once dealer exits once both parties are gone), then both parties"
	}
	return fmt.Sprintf("rerun %s with the same flags and their -state (here -state %s) to resume", procs, s.State)
}

// Error turns the error of a run into the one line the binary prints,
// saying where it stopped and exactly what to rerun; the error chain goes
// to s.Log at Debug level:
//   - stopped by SIGINT or SIGTERM (ctx ended): a peer.ExitInterrupted
//     error (peer.Interrupted);
//   - the two parties' flags differ: a FlagMismatch (peer.ExitUsage);
//   - the peer ended the session for a reason a rerun can mend (it was
//     interrupted, failed, or could not label), the peer crashed or the
//     link dropped (selection.ErrConnectionLost), or else the dealer's
//     connection died (DealerLost): where it stopped, why, and what to
//     rerun;
//   - anything else, and nil, as it is.
func (s Stop) Error(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if s.Log != nil {
		s.Log.Debug("stopped", "err", err)
	}
	if ctx.Err() != nil {
		return peer.Interrupted(s.Command, s.Prog.Where(), s.rerun(false), err)
	}
	if fm := flagMismatch(s.Party, err); fm != err {
		return peer.ConfigError(fm)
	}
	// The peer's word or its loss comes first: a dealer drops a party's
	// connection when its session's other party is gone, so a dealer
	// link found dead after the peer left is not the cause.
	var cause string
	dealerGone := false
	var pa *selection.PeerAbortError
	switch {
	case errors.As(err, &pa):
		switch pa.Code {
		case selection.AbortCancelled, selection.AbortInternal, selection.AbortInput:
			cause = fmt.Sprintf("the %s ended the session: %s", roleNames[pa.Party], pa.Reason)
		default:
			return err
		}
	case errors.Is(err, selection.ErrConnectionLost):
		cause = fmt.Sprintf("the connection to the %s was lost (it crashed or was killed, or the link dropped)", roleNames[1-s.Party])
	case s.DealerLost != nil && s.DealerLost():
		dealerGone = true
		cause = "the connection to the dealer was lost (it stopped, or the link dropped)"
	default:
		return err
	}
	line := "stopped"
	if w := s.Prog.Where(); w != "" {
		line += " " + w
	}
	return peer.WithCode(peer.Code(Classify(err)), &oneLine{text: line + ": " + cause + "; " + s.rerun(dealerGone), err: err})
}

// oneLine is an error printed as text, wrapping the error it explains.
type oneLine struct {
	text string
	err  error
}

func (e *oneLine) Error() string { return e.text }
func (e *oneLine) Unwrap() error { return e.err }

// WriteResult writes the result as indented JSON to path ("" writes nothing;
// "-" writes to w).
func WriteResult(path string, w io.Writer, r *selection.Result) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding result: %w", err)
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = w.Write(b)
		return err
	}
	// The selected indices are the two parties' business: owner-only.
	if err := atomicfile.Write(path, b, 0o600); err != nil {
		return fmt.Errorf("writing result: %w", err)
	}
	return nil
}

// ReadResult reads a result written by WriteResult.
func ReadResult(path string) (*selection.Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading result: %w", err)
	}
	r, err := ParseResult(b)
	if err != nil {
		return nil, fmt.Errorf("reading result %s: %w", path, err)
	}
	return r, nil
}

// ParseResult decodes a result file and checks that its index lists are
// sorted, distinct and non-negative.
func ParseResult(b []byte) (*selection.Result, error) {
	var r selection.Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decoding result: %w", err)
	}
	lists := append([][]int{r.Selected, r.Bootstrap}, r.Survivors...)
	for _, l := range lists {
		for i, v := range l {
			if v < 0 || (i > 0 && v <= l[i-1]) {
				return nil, fmt.Errorf("decoding result: index list %v is not ascending and non-negative", l)
			}
		}
	}
	return &r, nil
}

// Summary formats a result as the binaries print it: the selected count,
// then one line per phase (a sharded phase's totals include its worker
// pairs', selection.PhaseStats), each followed by one line per worker pair
// of a sharded phase.
func Summary(r *selection.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "selected %d points (bootstrap %d)\n", len(r.Selected), len(r.Bootstrap))
	for i, ph := range r.Phases {
		fmt.Fprintf(&b, "phase %d: %d -> %d candidates, %d batches (%d resumed), rounds %d forward + %d select, sent %s, received %s, randomness %s, %d comparisons, %.2fs\n",
			i+1, ph.In, ph.Out, ph.Batches, ph.Resumed, ph.ForwardRounds, ph.SelectRounds,
			Bytes(ph.BytesSent), Bytes(ph.BytesRecv), Bytes(ph.RandomnessBytes), ph.Comparisons, ph.Seconds)
		for _, s := range ph.Shards {
			fmt.Fprintf(&b, "  pair %d: %d batches (%d resumed), %d attempts, %d forward rounds, sent %s, received %s, randomness %s, %.2fs\n",
				s.Shard, s.Batches, s.Resumed, s.Attempts, s.ForwardRounds, Bytes(s.BytesSent), Bytes(s.BytesRecv), Bytes(s.RandomnessBytes), s.Seconds)
		}
	}
	if a := r.Appraisal; a != nil {
		switch a.Mode {
		case selection.AppraiseMean:
			fmt.Fprintf(&b, "appraisal: mean entropy of the selected set %.4f\n", a.Mean)
		case selection.AppraiseThreshold:
			fmt.Fprintf(&b, "appraisal: mean entropy exceeds the model owner's threshold: %v\n", a.Exceeds)
		}
	}
	return b.String()
}

// Bytes formats a byte count with a binary unit.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// OracleLabeler labels the bootstrap sample from a label per pool candidate
// (the demo's oracle; a real model owner would have the sample annotated).
func OracleLabeler(labels []int) selection.Labeler {
	return func(_ context.Context, idx []int, _ model.Input) ([]int, error) {
		out := make([]int, len(idx))
		for i, j := range idx {
			if j < 0 || j >= len(labels) {
				return nil, fmt.Errorf("bootstrap index %d outside the %d labels", j, len(labels))
			}
			out[i] = labels[j]
		}
		return out, nil
	}
}
