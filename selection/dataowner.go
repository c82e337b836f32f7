package selection

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/selection/lanes"
	"github.com/selectformer/selectformer/selection/purchase"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// dataOwnerRun is the data owner's driver: one Run of a DataOwner, the
// protocol from party 1's side, in order.
type dataOwnerRun struct {
	*runner
	d    *DataOwner
	eval Evaluator // d.Evaluator, or the embedding of the pool (set by check)
	// tree is the commitment to d.Items (nil without them; set by
	// commitPool).
	tree *purchase.Tree
	// archEmb is the embedding model the received architectures are
	// checked against (set by check; nil with a substitute Evaluator,
	// which checks what it needs).
	archEmb *model.Config
}

func (r *dataOwnerRun) run(ctx context.Context) (*Result, error) {
	hsCtx := ctx
	ctx, cancel := r.watchConn(ctx)
	defer cancel()
	// 1. Checkpoint: load, check, bump the epoch before talking to the peer.
	// Without a state directory, the record of a bootstrap sample sent by an
	// earlier Run of this DataOwner comes from memory.
	st, err := r.loadState()
	if err != nil {
		return nil, err
	}
	if st == nil {
		st = r.newState()
		if !r.store.durable() {
			if err := r.recall(st); err != nil {
				return nil, err
			}
		}
	}
	if !r.store.durable() {
		r.logf().Warn("selection: data owner without a StateDir: a restarted process cannot recognise a session whose bootstrap sample it already sent")
	}
	if err := r.commitPool(st); err != nil {
		return nil, err
	}
	if err := r.beginEpoch(st); err != nil {
		return nil, err
	}
	// 2. Handshake.
	if _, err := r.handshake(hsCtx); err != nil {
		return nil, err
	}
	res := &Result{Epoch: r.st.Epoch}
	// 3. This epoch's correlated randomness and sessions.
	if err := r.sched.Start(ctx, r.st.Epoch); err != nil {
		return nil, err
	}
	// 4. Coin, dealer session, bootstrap.
	seed, err := r.coin(ctx, func(ctx context.Context, st *transport.Stream) (share.Seed, error) {
		return tossCoinDataOwnerFrom(ctx, st, r.d.coinSource)
	})
	if err != nil {
		return nil, err
	}
	if err := r.bootstrap(ctx, seed); err != nil {
		return nil, err
	}
	res.Bootstrap = append([]int(nil), r.st.Bootstrap...)
	// 5. Architectures.
	archs, err := r.receiveArchs(ctx)
	if err != nil {
		return nil, err
	}
	// 6. Phases and appraisal.
	if err := r.selectAll(ctx, seed, r.eval, archs, receiveThreshold, res); err != nil {
		return nil, err
	}
	if !r.store.durable() {
		b, _ := json.Marshal(r.st)
		st, err := DecodeState(b)
		if err != nil {
			return nil, err
		}
		r.d.mu.Lock()
		r.d.bought = st
		r.d.mu.Unlock()
	}
	return res, nil
}

// recall fills st with the record of the bootstrap sample a Run of this
// DataOwner value sent (no state directory).
func (r *dataOwnerRun) recall(st *State) error {
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	rv := r.d.revealed
	if rv == nil {
		return nil
	}
	if rv.ViewHash != st.ViewHash {
		return fmt.Errorf("%w (%d points, under other parameters); use a new DataOwner for a new session", ErrBootstrapRevealed, len(rv.Bootstrap))
	}
	st.Revealed = rv.clone()
	st.Seed = rv.Seed
	return nil
}

// bootstrap sends the sample's inputs in the clear, after recording,
// durably, what it reveals; a restart re-sends exactly these points (the
// same coin gives the same sample) and never others.
func (r *dataOwnerRun) bootstrap(ctx context.Context, seed share.Seed) error {
	if r.st.BootstrapDone {
		return nil
	}
	idx := sampleBootstrap(seed, r.p.PoolSize, r.p.Bootstrap)
	if rv := r.st.Revealed; rv == nil {
		r.st.Revealed = &Revealed{ViewHash: r.st.ViewHash, Seed: r.st.Seed, Bootstrap: idx}
		if err := r.checkpoint(); err != nil {
			return fmt.Errorf("selection: bootstrap: record before sending: %w", err)
		}
	} else if rv.Seed != r.st.Seed || !slices.Equal(rv.Bootstrap, idx) {
		return fmt.Errorf("selection: bootstrap: %w: the sample to send differs from the one sent", ErrBootstrapRevealed)
	}
	var boot model.Input
	if r.d.Pool.Len() > 0 && len(idx) > 0 {
		var err error
		if boot, err = r.d.Pool.Select(idx); err != nil {
			return fmt.Errorf("selection: bootstrap: %w", err)
		}
	}
	b, err := json.Marshal(boot)
	if err != nil {
		return fmt.Errorf("selection: bootstrap: %w", err)
	}
	if err := r.ctrl.SendBytes(ctx, b); err != nil {
		return fmt.Errorf("selection: bootstrap: send: %w", err)
	}
	if r.openingBytes, err = r.sendOpenings(ctx, idx); err != nil {
		return err
	}
	return r.bootstrapDone(idx)
}

// receiveArchs receives the proxies' architectures and checks them against
// the schedule and the embedding model (r.archEmb). The message is at most
// archsMessageBound(n) bytes (decodeArchs refuses a longer one before
// decoding anything).
func (r *dataOwnerRun) receiveArchs(ctx context.Context) ([]secure.Arch, error) {
	n := len(r.p.Schedule)
	b, err := r.ctrl.RecvBytes(ctx, archsMessageBound(n))
	if err != nil {
		return nil, fmt.Errorf("selection: receive architectures: %w", err)
	}
	return decodeArchs(b, r.archEmb, r.p.Schedule, n, r.seq)
}

// maxArchBytes bounds one architecture's JSON in the model owner's message:
// an honest one (secure.Arch, no lists) takes about 350 bytes.
const maxArchBytes = 2 << 10

// archsMessageBound is the largest architectures message for n phases
// (bytes): n architectures of at most maxArchBytes, the brackets and commas.
func archsMessageBound(n int) int { return 2 + n*(maxArchBytes+1) }

// decodeArchs decodes the model owner's message of n architectures and, if
// emb is set, checks them (checkArchs). It bounds the message's length
// (archsMessageBound) and counts the architectures as it decodes them one by
// one into a list of n, so that no message, however it declares its
// contents, makes it allocate more than n architectures.
func decodeArchs(b []byte, emb *model.Config, sched []Phase, n, seq int) ([]secure.Arch, error) {
	if n < 0 || n > lanes.MaxPhases || len(sched) != n {
		return nil, fmt.Errorf("selection: %d architectures for %d phases", n, len(sched))
	}
	if lim := archsMessageBound(n); len(b) > lim {
		return nil, withCode(AbortLimit, fmt.Errorf("selection: architectures message of %d bytes (at most %d for %d phases)", len(b), lim, n))
	}
	bad := func(format string, args ...any) error {
		return withCode(AbortProtocol, fmt.Errorf("selection: decode architectures: "+format, args...))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, bad("not a list")
	}
	out := make([]secure.Arch, 0, n)
	for dec.More() {
		if len(out) == n {
			return nil, bad("more than %d architectures for %d phases", n, n)
		}
		var a secure.Arch
		if err := dec.Decode(&a); err != nil {
			return nil, bad("architecture %d: %w", len(out), err)
		}
		out = append(out, a)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		return nil, bad("unterminated list")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("data after the list")
	}
	if len(out) != n {
		return nil, bad("%d architectures for %d phases", len(out), n)
	}
	if emb == nil {
		return out, nil
	}
	if err := checkArchs(out, *emb, sched, seq); err != nil {
		return nil, withCode(AbortProtocol, err)
	}
	return out, nil
}

// checkArchs checks the model owner's proxy architectures against what the
// data owner knows: the public checkpoint's configuration emb (the target's
// family and sizes), the schedule and the pool's sequence length. A proxy
// keeps at most the target's layers and heads, with the target's head
// width, and an FFN (if any) of the target's width: an architecture beyond
// them is a lie, and it would size the data owner's allocations.
func checkArchs(archs []secure.Arch, emb model.Config, sched []Phase, seq int) error {
	for i, a := range archs {
		if err := a.Validate(); err != nil {
			return fmt.Errorf("selection: phase %d proxy: %w", i+1, err)
		}
		sp := sched[i].Proxy
		switch {
		case a.Family != emb.Family || a.Hidden != emb.Hidden:
			return fmt.Errorf("selection: phase %d proxy is a %s of width %d, the embedding model a %s of width %d", i+1, a.Family, a.Hidden, emb.Family, emb.Hidden)
		case a.Seq != seq:
			return fmt.Errorf("selection: phase %d proxy for %d tokens, the pool has %d", i+1, a.Seq, seq)
		case sp.Layers != 0 && a.Layers != sp.Layers, sp.Heads != 0 && a.Heads != sp.Heads, sp.MLPHidden != 0 && a.MLPHidden != sp.MLPHidden:
			return fmt.Errorf("selection: phase %d proxy ⟨%d, %d, %d⟩ differs from the schedule's %+v", i+1, a.Layers, a.Heads, a.MLPHidden, sp)
		case emb.Layers > 0 && a.Layers > emb.Layers, emb.Heads > 0 && (a.Heads > emb.Heads || a.HeadDim != emb.Hidden/emb.Heads),
			a.Intermediate != 0 && a.Intermediate != emb.Intermediate:
			return fmt.Errorf("selection: phase %d proxy of %d layers, %d heads of width %d, FFN %d does not fit the checkpoint's %d layers, %d heads of width %d, FFN %d",
				i+1, a.Layers, a.Heads, a.HeadDim, a.Intermediate, emb.Layers, emb.Heads, emb.Hidden/max(emb.Heads, 1), emb.Intermediate)
		}
	}
	return nil
}

// receiveThreshold receives the data owner's share of the model owner's
// private appraisal threshold.
func receiveThreshold(s *protocol.Session) (*share.Tensor, error) {
	t, err := s.ShareInput(0, nil, 1)
	if err != nil {
		return nil, fmt.Errorf("selection: appraisal: %w", err)
	}
	return t, nil
}

// tossCoinDataOwner is the data owner's side of the coin toss (see
// coinCommit): it receives the commitment, sends r1, checks the opening.
func tossCoinDataOwner(ctx context.Context, st *transport.Stream) (share.Seed, error) {
	return tossCoinDataOwnerFrom(ctx, st, nil)
}

// tossCoinDataOwnerFrom is tossCoinDataOwner drawing this party's contribution from src
// (crypto/rand when nil; tests fix it to repeat a selection).
func tossCoinDataOwnerFrom(ctx context.Context, st *transport.Stream, src io.Reader) (share.Seed, error) {
	var seed share.Seed
	mine, err := coinContribution(src)
	if err != nil {
		return seed, err
	}
	c, err := st.RecvBytes(ctx, maxCoinMessage)
	if err != nil {
		return seed, fmt.Errorf("selection: coin toss: receive commitment: %w", err)
	}
	if len(c) != sha256.Size {
		return seed, withCode(AbortProtocol, fmt.Errorf("selection: coin toss: commitment of %d bytes", len(c)))
	}
	if err := st.SendBytes(ctx, mine[:]); err != nil {
		return seed, fmt.Errorf("selection: coin toss: send: %w", err)
	}
	r0, err := st.RecvBytes(ctx, maxCoinMessage)
	if err != nil {
		return seed, fmt.Errorf("selection: coin toss: receive opening: %w", err)
	}
	if len(r0) != 32 || subtle.ConstantTimeCompare(coinCommit(r0), c) != 1 {
		return seed, withCode(AbortProtocol, fmt.Errorf("selection: coin toss: the model owner's opening does not match its commitment"))
	}
	return coinSeed(r0, mine[:]), nil
}
