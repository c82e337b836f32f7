package bench

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/transport"
)

// ModuleRow is one step of a proxy's secure forward (secure.ForwardCostRows)
// with the dealer words it draws, for a whole batch.
type ModuleRow struct {
	secure.CostRow
	// Dealer is the dealer bytes each party receives for the step (8 ×
	// beaver.Request.CorrectionWords of every request the step draws), and
	// Kinds the correlation kinds of those requests.
	Dealer [2]int64 `json:"dealer"`
	Kinds  []string `json:"kinds,omitempty"`
}

// ModuleTable is where the bytes of one secure forward go: the cost
// table's rows (secure.ForwardCostRows: rounds and bytes each party sends,
// the exact costs the tests pin) with each row's dealer bytes, counted
// from the requests the forward drew during the row's rounds; and what the
// forward measured, which the rows must add up to.
type ModuleTable struct {
	Config ForwardConfig `json:"config"`
	Arch   secure.Arch   `json:"arch"`
	Rows   []ModuleRow   `json:"rows"`
	// Measured is the measured forward (both parties' online bytes, its
	// rounds, the dealer bytes each party received).
	MeasuredRounds int64    `json:"measured_rounds"`
	MeasuredBytes  [2]int64 `json:"measured_bytes"`
	MeasuredDealer [2]int64 `json:"measured_dealer"`
	// Credit is the bytes each party sent beyond the rows: the transport's
	// flow-control CREDIT frames (a 10-byte header per half stream window,
	// 8 MiB, received), counted in what a party sends but in no
	// protocol's cost.
	Credit [2]int64 `json:"credit"`
}

// Total returns the rows' sums (Module "total").
func (t *ModuleTable) Total() ModuleRow {
	tot := ModuleRow{CostRow: secure.CostRow{Module: "total"}}
	for _, r := range t.Rows {
		tot.Rounds += r.Rounds
		for p := range 2 {
			tot.Bytes[p] += r.Bytes[p]
			tot.Dealer[p] += r.Dealer[p]
		}
	}
	return tot
}

// Check reports whether the rows add up to the measured forward: its
// rounds and dealer bytes exactly, each party's bytes up to its CREDIT
// frames (Credit: whole 10-byte headers, at most one per half window of
// what the other party sent, plus one).
func (t *ModuleTable) Check() error {
	tot := t.Total()
	creditOK := true
	for p := range 2 {
		c := t.Credit[p]
		most := int64(transport.MessageBytes(0)) * (1 + t.MeasuredBytes[1-p]/(transport.DefaultStreamWindow/2))
		creditOK = creditOK && c >= 0 && c%transport.MessageBytes(0) == 0 && c <= most && tot.Bytes[p]+c == t.MeasuredBytes[p]
	}
	if tot.Rounds != t.MeasuredRounds || !creditOK || tot.Dealer != t.MeasuredDealer {
		return fmt.Errorf("bench: module table of %s %dL %dH d%d: rows total %d rounds, bytes %v, dealer %v; the forward measured %d, %v, %v",
			t.Config.Shape, t.Arch.Layers, t.Arch.Heads, t.Arch.MLPHidden, tot.Rounds, tot.Bytes, tot.Dealer, t.MeasuredRounds, t.MeasuredBytes, t.MeasuredDealer)
	}
	return nil
}

// SST2Phase0 is the forward of the sst2-distilbert workload's first phase:
// its proxy ⟨1L,12H,d2⟩ of DistilBERT at sequence 128, one candidate.
var SST2Phase0 = ForwardConfig{Shape: "distilbert", Layers: 1, Heads: 12, MLPHidden: 2, Seq: 128, Batch: 1, Seed: 1}

// ModuleCosts measures one Forward of cfg (a SelectFormer proxy: every
// module an MLP, no private embeddings) and returns its module table: the
// rows of secure.ForwardCostRows, each with the dealer bytes of the
// requests drawn while the forward was in the row's rounds (a step draws
// its material before or during its exchanges, so a request drawn when r
// rounds were done belongs to the row whose rounds span r). Check tells
// whether the rows add up to what was measured.
func ModuleCosts(ctx context.Context, cfg ForwardConfig) (*ModuleTable, error) {
	a, err := forwardArch(cfg)
	if err != nil {
		return nil, err
	}
	rows, err := secure.ForwardCostRows(a, cfg.Batch, cfg.Options)
	if err != nil {
		return nil, fmt.Errorf("bench: module costs: %w", err)
	}
	var tracers [2]*requestTracer
	wrap := func(party int, p beaver.Provider) beaver.Provider {
		tracers[party] = &requestTracer{Provider: p}
		return tracers[party]
	}
	r, err := RunLocal(ctx, LocalConfig{Link: cfg.Link, Wrap: wrap}, func(ctx context.Context, s *protocol.Session) (ForwardParty, error) {
		a, nw, in, err := forwardSetup(s, cfg)
		if err != nil {
			return ForwardParty{}, err
		}
		return forwardParty(ctx, s, a, nw, in, cfg, func() { tracers[s.Party()].arm(s.Stream()) })
	})
	if err != nil {
		return nil, err
	}
	t := &ModuleTable{Config: cfg, Arch: a}
	for _, row := range rows {
		t.Rows = append(t.Rows, ModuleRow{CostRow: row})
	}
	p0, p1 := r.Out[0].Forward, r.Out[1].Forward
	t.MeasuredRounds = p0.Stream.Rounds
	t.MeasuredBytes = [2]int64{p0.Stream.BytesSent, p1.Stream.BytesSent}
	t.MeasuredDealer = [2]int64{p0.Dealer.BytesRecv, p1.Dealer.BytesRecv}
	_, rowBytes := secure.SumCostRows(rows)
	for p := range 2 {
		t.Credit[p] = t.MeasuredBytes[p] - rowBytes[p]
	}
	// Both parties draw the same requests (their sizes are public): party
	// 0's trace gives both parties' dealer words.
	for _, q := range tracers[0].requests() {
		i, start := 0, int64(0)
		for i < len(t.Rows)-1 && q.round >= start+t.Rows[i].Rounds {
			start += t.Rows[i].Rounds
			i++
		}
		row := &t.Rows[i]
		for p := range 2 {
			row.Dealer[p] += 8 * q.words[p]
		}
		if !slices.Contains(row.Kinds, q.kind) {
			row.Kinds = append(row.Kinds, q.kind)
		}
	}
	return t, nil
}

// requestTracer records the requests drawn through the provider it wraps
// once armed: each one's kind, dealer words per party and the rounds its
// session's stream had done when it was drawn.
type requestTracer struct {
	beaver.Provider
	mu     sync.Mutex
	stream *transport.Stream
	base   int64
	reqs   []tracedRequest
}

// Unwrap implements beaver.Wrapper.
func (r *requestTracer) Unwrap() beaver.Provider { return r.Provider }

type tracedRequest struct {
	round int64
	kind  string
	words [2]int64
}

// arm starts recording, counting rounds on st from now.
func (t *requestTracer) arm(st *transport.Stream) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stream, t.base = st, st.Stats().Rounds
}

// Material implements beaver.Provider, recording r when armed.
func (t *requestTracer) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	t.mu.Lock()
	if t.stream != nil {
		t.reqs = append(t.reqs, tracedRequest{round: t.stream.Stats().Rounds - t.base, kind: r.Kind.String(),
			words: [2]int64{int64(r.CorrectionWords(0)), int64(r.CorrectionWords(1))}})
	}
	t.mu.Unlock()
	return t.Provider.Material(ctx, r)
}

func (t *requestTracer) requests() []tracedRequest {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.reqs)
}

// WriteModuleTable writes t as a markdown table, per candidate: each
// step's module, rounds, the bytes each party sends, the dealer bytes each
// receives and their kinds, and the step's share of the data owner's
// traffic (what it sends and what the dealer sends it: the busiest
// direction of both its links); then the transport's credit frames and the
// totals.
func WriteModuleTable(w io.Writer, t *ModuleTable) error {
	bw := bufio.NewWriter(w)
	b := float64(t.Config.Batch)
	tot := t.Total()
	per := func(v int64) string { return FormatBytes(float64(v) / b) }
	fmt.Fprintln(bw, "| module | step | rounds | P0 sends | P1 sends | dealer → P0 | dealer → P1 | dealer kinds | share of P1's traffic |")
	fmt.Fprintln(bw, "|---|---|---:|---:|---:|---:|---:|---|---:|")
	all := float64(tot.Bytes[1] + t.Credit[1] + tot.Dealer[1])
	for _, r := range t.Rows {
		kinds := strings.Join(r.Kinds, ", ")
		if kinds == "" {
			kinds = "—"
		}
		fmt.Fprintf(bw, "| %s | %s | %d | %s | %s | %s | %s | %s | %.1f%% |\n", r.Module, r.Step, r.Rounds, per(r.Bytes[0]), per(r.Bytes[1]),
			per(r.Dealer[0]), per(r.Dealer[1]), kinds, 100*float64(r.Bytes[1]+r.Dealer[1])/all)
	}
	fmt.Fprintf(bw, "| transport | flow-control credit frames | 0 | %s | %s | | | | %.1f%% |\n", per(t.Credit[0]), per(t.Credit[1]), 100*float64(t.Credit[1])/all)
	fmt.Fprintf(bw, "| **total** (measured) | | %d | %s | %s | %s | %s | | 100%% |\n", tot.Rounds, per(tot.Bytes[0]+t.Credit[0]), per(tot.Bytes[1]+t.Credit[1]), per(tot.Dealer[0]), per(tot.Dealer[1]))
	return bw.Flush()
}

// ModuleSummary sums t's rows by module, in the order they first appear.
func ModuleSummary(t *ModuleTable) []ModuleRow {
	var out []ModuleRow
	idx := map[string]int{}
	for _, r := range t.Rows {
		i, ok := idx[r.Module]
		if !ok {
			i = len(out)
			idx[r.Module] = i
			out = append(out, ModuleRow{CostRow: secure.CostRow{Module: r.Module}})
		}
		m := &out[i]
		m.Rounds += r.Rounds
		for p := range 2 {
			m.Bytes[p] += r.Bytes[p]
			m.Dealer[p] += r.Dealer[p]
		}
		for _, k := range r.Kinds {
			if !slices.Contains(m.Kinds, k) {
				m.Kinds = append(m.Kinds, k)
			}
		}
	}
	return out
}

// WriteModuleSummary writes t's sums per module (ModuleSummary) as a
// markdown table, per candidate, largest share of the data owner's traffic
// first.
func WriteModuleSummary(w io.Writer, t *ModuleTable) error {
	bw := bufio.NewWriter(w)
	b := float64(t.Config.Batch)
	per := func(v int64) string { return FormatBytes(float64(v) / b) }
	tot := t.Total()
	all := float64(tot.Bytes[1] + t.Credit[1] + tot.Dealer[1])
	sum := ModuleSummary(t)
	slices.SortStableFunc(sum, func(x, y ModuleRow) int {
		return cmp.Compare(y.Bytes[1]+y.Dealer[1], x.Bytes[1]+x.Dealer[1])
	})
	fmt.Fprintln(bw, "| module | rounds | P0 sends | P1 sends | dealer → P0 | dealer → P1 | P1 sends + receives from the dealer | share |")
	fmt.Fprintln(bw, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, m := range sum {
		fmt.Fprintf(bw, "| %s | %d | %s | %s | %s | %s | %s | %.1f%% |\n", m.Module, m.Rounds, per(m.Bytes[0]), per(m.Bytes[1]), per(m.Dealer[0]), per(m.Dealer[1]),
			per(m.Bytes[1]+m.Dealer[1]), 100*float64(m.Bytes[1]+m.Dealer[1])/all)
	}
	return bw.Flush()
}
