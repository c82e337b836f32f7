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
	"os"
	"strings"

	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/internal/atomicfile"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/model"
	"github.com/selectformer/selectformer/selection"
)

// DefaultSchedule is the schedule of the examples: a 1-layer proxy with MLP
// width 8 keeps 40% of the candidates, then a 2-layer proxy with width 16
// picks the budget.
const DefaultSchedule = "1:4:8@0.4,2:4:16"

// ParamFlags are the public parameters both parties must pass alike.
type ParamFlags struct {
	PoolSize  int
	Budget    int
	Bootstrap int
	Schedule  string
	Batch     int
	Workers   int
	Appraisal string
}

// Register adds the flags to fs. withPool adds -pool-size (the data owner
// reads it from its pool file instead).
func (p *ParamFlags) Register(fs *flag.FlagSet, withPool bool) {
	if withPool {
		fs.IntVar(&p.PoolSize, "pool-size", 0, "number of candidates in the data owner's pool; required")
	}
	fs.IntVar(&p.Budget, "budget", 0, "points bought in total, bootstrap included; required")
	fs.IntVar(&p.Bootstrap, "bootstrap", 0, "size of the bootstrap sample (labelled by the model owner); required")
	fs.StringVar(&p.Schedule, "schedule", DefaultSchedule, "phases l:w:d@keep (layers, heads, MLP width, fraction kept), comma-separated; the last phase keeps the budget")
	fs.IntVar(&p.Batch, "batch", 0, "candidates per secure forward batch (0: the library default)")
	fs.IntVar(&p.Workers, "workers", 0, "batches in flight at once (0: the library default)")
	fs.StringVar(&p.Appraisal, "appraisal", "", "appraise the final set: \"\" (no), mean, threshold")
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
	if p.Batch < 0 || p.Workers < 0 {
		return selection.Params{}, peer.Usage("flags -batch and -workers must not be negative")
	}
	out := selection.Params{PoolSize: p.PoolSize, Budget: p.Budget, Bootstrap: p.Bootstrap, Schedule: sched,
		BatchSize: p.Batch, Workers: p.Workers, Appraisal: selection.AppraisalMode(p.Appraisal)}
	if err := out.Validate(); err != nil {
		return selection.Params{}, peer.Usage("%v", err)
	}
	return out, nil
}

// GenerateConfig is the proxy generation used by the examples: the
// library's defaults (proxy.Config.WithDefaults, scaled to the bootstrap: a
// few seconds on 2 cores for the demo ViT); points, if positive, sets the
// size of each MLP training set.
func GenerateConfig(points int, seed uint64) proxy.Config {
	return proxy.Config{Points: max(points, 0), Seed: seed}
}

// Classify maps an error of a selection run to an exit code: a handshake
// mismatch, the peer's abort and a refused second bootstrap are
// peer.ExitPeer; a corrupt, truncated or foreign checkpoint file
// (*selection.StateError, which names the file) is peer.ExitInput; coded
// errors keep their code; the rest is peer.ExitFailure.
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
	case errors.As(err, &mm), errors.As(err, &pa), errors.Is(err, selection.ErrBootstrapRevealed):
		return peer.WithCode(peer.ExitPeer, err)
	case errors.As(err, &se):
		return peer.WithCode(peer.ExitInput, err)
	}
	return peer.WithCode(peer.Code(err), err)
}

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
// then one line per phase.
func Summary(r *selection.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "selected %d points (bootstrap %d)\n", len(r.Selected), len(r.Bootstrap))
	for i, ph := range r.Phases {
		fmt.Fprintf(&b, "phase %d: %d -> %d candidates, %d batches (%d resumed), rounds %d forward + %d select, sent %s, received %s, dealer %s, %d comparisons, %.2fs\n",
			i+1, ph.In, ph.Out, ph.Batches, ph.Resumed, ph.ForwardRounds, ph.SelectRounds,
			Bytes(ph.BytesSent), Bytes(ph.BytesRecv), Bytes(ph.DealerBytes), ph.Comparisons, ph.Seconds)
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
