package selection

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// modelOwnerRun is the model owner's driver: one Run of a ModelOwner, the
// protocol from party 0's side, in order.
type modelOwnerRun struct {
	*runner
	m *ModelOwner
}

func (d *modelOwnerRun) run(ctx context.Context) (*Result, error) {
	hsCtx := ctx
	ctx, cancel := d.watchConn(ctx)
	defer cancel()
	// 1. Checkpoint: load, check, bump the epoch before talking to the peer.
	st, err := d.loadState()
	if err != nil {
		return nil, err
	}
	if st == nil {
		st = d.newState()
	}
	if err := d.beginEpoch(st); err != nil {
		return nil, err
	}
	// 2. Handshake; the data owner announces the sequence length.
	peer, err := d.handshake(hsCtx)
	if err != nil {
		return nil, err
	}
	d.seq = peer.Seq
	res := &Result{Epoch: d.st.Epoch}
	// 3. This epoch's correlated randomness and sessions.
	if err := d.sched.Start(ctx, d.st.Epoch); err != nil {
		return nil, err
	}
	// 4. Coin, dealer session (announcing the budget of the proxies' shapes),
	// bootstrap.
	d.dealerBudget = d.budget
	seed, err := d.coin(ctx, func(ctx context.Context, st *transport.Stream) (share.Seed, error) {
		return tossCoinModelOwnerFrom(ctx, st, d.m.coinSource)
	})
	if err != nil {
		return nil, err
	}
	if err := d.bootstrap(ctx, seed); err != nil {
		return nil, err
	}
	res.Bootstrap = append([]int(nil), d.st.Bootstrap...)
	// 5. Architectures, of the proxies that now exist.
	eval := d.evaluator()
	archs, err := d.announceArchs(ctx, eval)
	if err != nil {
		return nil, err
	}
	// 6. Phases and appraisal.
	if err := d.selectAll(ctx, seed, eval, archs, d.shareThreshold, res); err != nil {
		return nil, err
	}
	return res, nil
}

// budget is the model owner's dealer session budget: DealerBudget of the
// proxies the phases will run (plannedArchs), rehearsed with the
// Evaluator when the model owner runs a substitute one.
func (d *modelOwnerRun) budget(ctx context.Context) (uint64, error) {
	eval, archs, err := d.plannedArchs()
	if err != nil {
		return 0, fmt.Errorf("selection: dealer budget: %w", err)
	}
	return dealerBudget(ctx, d.p, eval, archs)
}

// plannedArchs returns the architectures of the phases' proxies before
// they exist, with the Evaluator that rehearses them: the Evaluator's (a
// substitute one, or the proxies given or saved by an earlier run of the
// session, which it loads), or those that proxy.Generate will make from
// the target (generatedArchs), rehearsed on random weights.
func (d *modelOwnerRun) plannedArchs() (Evaluator, []secure.Arch, error) {
	if d.m.Evaluator == nil && d.m.Proxies == nil && d.st.BootstrapDone {
		if err := d.loadProxies(); err != nil {
			return nil, nil, err
		}
	}
	if d.m.Evaluator == nil && d.m.Proxies == nil {
		if d.m.Target == nil {
			return nil, nil, fmt.Errorf("no target, proxies or evaluator")
		}
		archs, err := generatedArchs(d.m.Target.Config, d.m.generateConfig(d.p), d.seq)
		return archEvaluator{}, archs, err
	}
	eval := d.evaluator()
	archs := make([]secure.Arch, len(d.p.Schedule))
	for i := range archs {
		a, err := eval.Arch(i, d.seq)
		if err != nil {
			return nil, nil, fmt.Errorf("phase %d architecture: %w", i, err)
		}
		archs[i] = a
	}
	return eval, archs, nil
}

// bootstrap receives the data owner's sample, labels it and makes the
// proxies; on a resumed run it reloads the saved proxies.
func (d *modelOwnerRun) bootstrap(ctx context.Context, seed share.Seed) error {
	if d.st.BootstrapDone {
		if d.m.Evaluator == nil {
			return d.loadProxies()
		}
		return nil
	}
	idx := sampleBootstrap(seed, d.p.PoolSize, d.p.Bootstrap)
	width := bootstrapWidth(d.modelConfig())
	b, err := d.ctrl.RecvBytes(ctx, bootstrapMessageBound(len(idx), width))
	if err != nil {
		return fmt.Errorf("selection: bootstrap: receive: %w", err)
	}
	if d.m.onBootstrap != nil {
		if err := d.m.onBootstrap(b); err != nil {
			return err
		}
	}
	boot, err := decodeBootstrap(b, len(idx), width)
	if err != nil {
		return err
	}
	if boot, err = d.receiveOpenings(ctx, idx, boot); err != nil {
		return err
	}
	if err := d.makeProxies(ctx, idx, boot); err != nil {
		return err
	}
	return d.bootstrapDone(idx)
}

// modelConfig is the configuration of the model owner's target (or of its
// first proxy; nil with neither).
func (d *modelOwnerRun) modelConfig() *model.Config {
	switch m := d.m; {
	case m.Target != nil:
		return &m.Target.Config
	case len(m.Proxies) > 0 && m.Proxies[0] != nil && m.Proxies[0].Model != nil:
		return &m.Proxies[0].Model.Config
	}
	return nil
}

// makeProxies labels the bootstrap sample and generates the proxies (unless
// given, or replaced by a substitute Evaluator), saving them in the state
// directory.
func (d *modelOwnerRun) makeProxies(ctx context.Context, idx []int, boot model.Input) error {
	m := d.m
	if m.Evaluator != nil {
		return nil
	}
	if m.Proxies == nil {
		labels, err := d.label(ctx, idx, boot)
		if err != nil {
			return err
		}
		r, err := proxy.Generate(ctx, m.Target, boot, labels, m.generateConfig(d.p))
		if err != nil {
			return withCode(AbortInput, fmt.Errorf("selection: bootstrap: generate proxies: %w", err))
		}
		m.Proxies = r.Proxies
		if dir := d.store.proxiesDir(); dir != "" {
			for i, p := range r.Proxies {
				if err := p.Save(filepath.Join(dir, fmt.Sprintf("phase-%d", i+1)), r.Reports); err != nil {
					return withCode(AbortState, fmt.Errorf("selection: save the proxy of phase %d: %w", i+1, err))
				}
			}
		}
	}
	return nil
}

// label returns the labels of the bootstrap sample idx of inputs boot:
// those an earlier run recorded in the checkpoint for the same points
// (indices and inputs), or m.Label's, which
// are recorded (State.Labelled) the moment they exist, before the proxies
// are generated, so that no restart asks for them again.
func (d *modelOwnerRun) label(ctx context.Context, idx []int, boot model.Input) ([]int, error) {
	if labels, ok := d.st.labelsOf(idx, boot); ok {
		d.logf().Info("selection: bootstrap labels from the checkpoint (labelled by an earlier run)", "points", len(idx))
		return labels, nil
	}
	labels, err := d.m.Label(ctx, idx, boot)
	if err != nil {
		return nil, withCode(AbortInput, fmt.Errorf("selection: bootstrap: label: %w", err))
	}
	if len(labels) != len(idx) {
		return nil, withCode(AbortInput, fmt.Errorf("selection: bootstrap: %d labels for %d samples", len(labels), len(idx)))
	}
	for _, l := range labels {
		if l < 0 {
			return nil, withCode(AbortInput, fmt.Errorf("selection: bootstrap: label %d", l))
		}
	}
	d.st.Labelled = &BootstrapLabels{Bootstrap: slices.Clone(idx), Points: pointsHash(boot), Labels: slices.Clone(labels)}
	if err := d.checkpoint(); err != nil {
		return nil, withCode(AbortState, fmt.Errorf("selection: bootstrap: record the labels: %w", err))
	}
	return labels, nil
}

// loadProxies reloads the proxies saved by an earlier run of the session.
func (d *modelOwnerRun) loadProxies() error {
	m := d.m
	if m.Proxies == nil {
		dir := d.store.proxiesDir()
		if dir == "" {
			return fmt.Errorf("selection: resume: no saved proxies")
		}
		for i := range d.p.Schedule {
			path := ProxyDir(dir, i)
			p, err := proxy.Load(path)
			if err != nil {
				return &StateError{Path: path, Err: fmt.Errorf("resume: load the proxy of phase %d: %w", i+1, err)}
			}
			if err := checkProxy(i, p, d.p.Schedule[i]); err != nil {
				return &StateError{Path: path, Err: err}
			}
			m.Proxies = append(m.Proxies, p)
		}
	}
	return nil
}

// evaluator returns the model owner's side of the secure forward: the
// substitute Evaluator, or the secure forward of the proxies (given,
// generated at the bootstrap or reloaded on a resumed run: call it once
// they exist).
func (d *modelOwnerRun) evaluator() Evaluator {
	if d.m.Evaluator != nil {
		return d.m.Evaluator
	}
	return &modelEvaluator{proxies: d.m.Proxies}
}

// announceArchs sends the public architectures of eval's proxies.
func (d *modelOwnerRun) announceArchs(ctx context.Context, eval Evaluator) ([]secure.Arch, error) {
	out := make([]secure.Arch, len(d.p.Schedule))
	for i := range out {
		a, err := eval.Arch(i, d.seq)
		if err != nil {
			return nil, fmt.Errorf("selection: phase %d architecture: %w", i+1, err)
		}
		out[i] = a
	}
	b, _ := json.Marshal(out)
	if err := d.ctrl.SendBytes(ctx, b); err != nil {
		return nil, fmt.Errorf("selection: send architectures: %w", err)
	}
	return out, nil
}

// shareThreshold inputs the private appraisal threshold.
func (d *modelOwnerRun) shareThreshold(s *protocol.Session) (*share.Tensor, error) {
	enc, err := d.p.FixedPoint.EncodeTensor([]float64{d.m.Threshold}, 1)
	if err != nil {
		return nil, fmt.Errorf("selection: appraisal threshold: %w", err)
	}
	t, err := s.ShareInput(0, enc)
	if err != nil {
		return nil, fmt.Errorf("selection: appraisal: %w", err)
	}
	return t, nil
}

// encodeProxy is the model owner's proxy of phase for its workers' jobs
// (nil with a substitute Evaluator, which the workers hold themselves).
func (d *modelOwnerRun) encodeProxy(phase int) ([]byte, error) {
	if d.m.Evaluator != nil {
		return nil, nil
	}
	if phase < 0 || phase >= len(d.m.Proxies) || d.m.Proxies[phase] == nil {
		return nil, fmt.Errorf("selection: phase %d: no proxy for the workers", phase+1)
	}
	return d.m.Proxies[phase].Marshal()
}

// tossCoinModelOwner is the model owner's side of the coin toss (see
// coinCommit): it commits to r0, receives r1, opens r0.
func tossCoinModelOwner(ctx context.Context, st *transport.Stream) (share.Seed, error) {
	return tossCoinModelOwnerFrom(ctx, st, nil)
}

// tossCoinModelOwnerFrom is tossCoinModelOwner drawing this party's contribution from src
// (crypto/rand when nil; tests fix it to repeat a selection).
func tossCoinModelOwnerFrom(ctx context.Context, st *transport.Stream, src io.Reader) (share.Seed, error) {
	var seed share.Seed
	mine, err := coinContribution(src)
	if err != nil {
		return seed, err
	}
	if err := st.SendBytes(ctx, coinCommit(mine[:])); err != nil {
		return seed, fmt.Errorf("selection: coin toss: send commitment: %w", err)
	}
	r1, err := st.RecvBytes(ctx, maxCoinMessage)
	if err != nil {
		return seed, fmt.Errorf("selection: coin toss: receive: %w", err)
	}
	if len(r1) != 32 {
		return seed, withCode(AbortProtocol, fmt.Errorf("selection: coin toss: peer coin of %d bytes", len(r1)))
	}
	if err := st.SendBytes(ctx, mine[:]); err != nil {
		return seed, fmt.Errorf("selection: coin toss: open: %w", err)
	}
	return coinSeed(mine[:], r1), nil
}

// maxJSONNumber is the longest JSON number encoding/json writes for an int
// or a float64, with its separator ("-2.2250738585072014e-308,").
const maxJSONNumber = 25

// maxBootstrapUnsized bounds a bootstrap message when the row width is not
// known (the model owner runs an Evaluator without a model).
const maxBootstrapUnsized = 1 << 30

// bootstrapMessageBound is the largest bootstrap message of n candidates
// whose rows hold at most width values each (bytes): four fields (IDs,
// TypeIDs, Mask, Pixels) of n rows of width numbers, each at most 25
// characters as encoding/json writes a float64 ("-2.2250738585072014e-308,"),
// with brackets and keys. Without a width it is maxBootstrapUnsized.
func bootstrapMessageBound(n, width int) int {
	if width <= 0 || n < 0 {
		return maxBootstrapUnsized
	}
	per := 4 * (2 + maxJSONNumber*width)
	if n > (maxBootstrapUnsized-64)/per {
		return maxBootstrapUnsized
	}
	return 64 + n*per
}

// bootstrapWidth is the longest row of a bootstrap input for the model
// owner's model cfg: the pixels of an image (ViT) or the positions of a
// sequence (0: no model).
func bootstrapWidth(cfg *model.Config) int {
	switch {
	case cfg == nil:
		return 0
	case cfg.Family == model.ViT:
		return cfg.NumChannels * cfg.ImageSize * cfg.ImageSize
	}
	return cfg.MaxPositions
}

// decodeBootstrap parses the data owner's bootstrap message: the inputs of
// the n sampled candidates (a JSON model.Input, empty when the data owner
// runs without a pool, as in tests with a substitute Evaluator), rows of at
// most width values (0: rows as long as the message allows), in a message
// of at most bootstrapMessageBound(n, width) bytes. It counts before it
// allocates: at most n rows a field, each row's values counted in the
// message before the row is decoded (into a list of exactly that capacity),
// and every row of a field as long as the first; so the heap it takes is at
// most the decoded inputs plus a copy of the message, however the message
// declares its sizes.
func decodeBootstrap(b []byte, n, width int) (model.Input, error) {
	var in model.Input
	if n < 0 {
		return in, fmt.Errorf("selection: bootstrap: a sample of %d", n)
	}
	if lim := bootstrapMessageBound(n, width); len(b) > lim {
		return in, withCode(AbortLimit, fmt.Errorf("selection: bootstrap: message of %d bytes (at most %d for %d inputs of %d values)", len(b), lim, n, width))
	}
	bad := func(err error) (model.Input, error) {
		return model.Input{}, withCode(AbortProtocol, fmt.Errorf("selection: bootstrap: decode: %w", err))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return bad(fmt.Errorf("not an object"))
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad(err)
		}
		key, _ := tok.(string)
		// encoding/json matches field names without regard to case.
		k := strings.ToLower(key)
		if seen[k] {
			return bad(fmt.Errorf("field %s twice", k))
		}
		seen[k] = true
		switch k {
		case "ids":
			in.IDs, err = decodeRows[int](dec, b, n, width)
		case "typeids":
			in.TypeIDs, err = decodeRows[int](dec, b, n, width)
		case "mask":
			in.Mask, err = decodeRows[int](dec, b, n, width)
		case "pixels":
			in.Pixels, err = decodeRows[float64](dec, b, n, width)
		default:
			return bad(fmt.Errorf("unknown field %.40q", key))
		}
		if err != nil {
			return bad(fmt.Errorf("%s: %w", k, err))
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return bad(fmt.Errorf("unterminated object"))
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad(fmt.Errorf("data after the object"))
	}
	if got := in.Len(); got != n && got != 0 {
		return in, withCode(AbortProtocol, fmt.Errorf("selection: bootstrap: %d inputs for a sample of %d", got, n))
	}
	if _, err := in.Select(nil); err != nil {
		return in, withCode(AbortProtocol, fmt.Errorf("selection: bootstrap: %w", err))
	}
	return in, nil
}

// decodeRows decodes a field of the bootstrap message (null or a list of at
// most n rows of numbers, at most width values each if width > 0, all as
// long as the first) from dec, whose input is b. Each row's values are
// counted in b before the row is decoded into a list of that capacity.
func decodeRows[T int | float64](dec *json.Decoder, b []byte, n, width int) ([][]T, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, nil
	}
	if tok != json.Delim('[') {
		return nil, fmt.Errorf("not a list")
	}
	rows := make([][]T, 0, min(n, len(b)/2+1))
	for dec.More() {
		if len(rows) == n {
			return nil, fmt.Errorf("more than %d rows", n)
		}
		cnt, err := countRow(b, dec.InputOffset())
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", len(rows), err)
		}
		switch {
		case width > 0 && cnt > width:
			return nil, fmt.Errorf("row %d of %d values (at most %d)", len(rows), cnt, width)
		case len(rows) > 0 && cnt > len(rows[0]):
			return nil, fmt.Errorf("row %d of %d values, row 0 of %d", len(rows), cnt, len(rows[0]))
		}
		row := make([]T, 0, cnt)
		if err := dec.Decode(&row); err != nil {
			return nil, fmt.Errorf("row %d: %w", len(rows), err)
		}
		if len(rows) > 0 && len(row) != len(rows[0]) {
			return nil, fmt.Errorf("row %d of %d values, row 0 of %d", len(rows), len(row), len(rows[0]))
		}
		rows = append(rows, row)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		return nil, fmt.Errorf("unterminated list")
	}
	return rows, nil
}

// countRow counts the values of the row that starts at off in b (after
// whitespace and a separating comma): an upper bound for a list of numbers
// (commas + 1), 0 for null or an empty list. A row holding anything but
// numbers (a list, an object, a string) is refused.
func countRow(b []byte, off int64) (int, error) {
	i := int(off)
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r' || b[i] == ',') {
		i++
	}
	if i < len(b) && b[i] == 'n' {
		return 0, nil // null (or garbage, which Decode refuses)
	}
	if i >= len(b) || b[i] != '[' {
		return 0, fmt.Errorf("not a list")
	}
	count, empty := 0, true
	for i++; i < len(b); i++ {
		switch b[i] {
		case ']':
			if empty {
				return 0, nil
			}
			return count + 1, nil
		case ',':
			count++
		case '[', '{', '"':
			return 0, fmt.Errorf("not a list of numbers")
		case ' ', '\t', '\n', '\r':
		default:
			empty = false
		}
	}
	return 0, fmt.Errorf("unterminated")
}
