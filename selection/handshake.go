package selection

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/selection/internal/testhook"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// MismatchError is the handshake's error when the two parties disagree on a
// public parameter: it names the field and both values.
type MismatchError struct {
	// Field is the parameter's name, e.g. "budget".
	Field string
	// Local and Peer are the two values, formatted (hashes shortened).
	Local, Peer string
	// Hint, if set, says how to resolve the mismatch.
	Hint string `json:",omitempty"`
}

func (e *MismatchError) Error() string {
	s := fmt.Sprintf("selection: handshake: %s mismatch: local %s, peer %s", e.Field, e.Local, e.Peer)
	if e.Hint != "" {
		s += ": " + e.Hint
	}
	return s
}

// EmbeddingHint is the Hint of an embedding_hash mismatch.
const EmbeddingHint = "the two parties embed with different tables; the proxies share the target's embedding tables, " +
	"so both parties must load the same checkpoint (the data owner's Embedding is the model owner's target checkpoint " +
	"or the pretrained one it was fine-tuned from), and fine-tuning the target must freeze its embeddings " +
	"(model.TrainConfig.FreezeEmbeddings)"

// HashMismatch is the mismatch of field between two hashes, local and
// peer, each shortened for display to as many hex digits as tell them
// apart (at least 12).
func HashMismatch(field, local, peer string) *MismatchError {
	l, p := shortHashes(local, peer)
	return &MismatchError{Field: field, Local: l, Peer: p}
}

// shortHashes shortens two differing hashes to 12 hex digits for display,
// keeping as many digits as it takes to tell them apart.
func shortHashes(a, b string) (string, string) {
	n := 12
	for n < max(len(a), len(b)) && len(a) > n && len(b) > n && a[:n] == b[:n] {
		n += 4
	}
	cut := func(s string) string {
		switch {
		case s == "":
			return "(none)"
		case len(s) > n:
			return s[:n] + "…"
		}
		return s
	}
	return cut(a), cut(b)
}

// hello is what each party announces in the clear before anything secret.
type hello struct {
	Version       int     `json:"version"`
	Party         int     `json:"party"`
	FracBits      uint    `json:"frac_bits"`
	IntBits       uint    `json:"int_bits"`
	PoolSize      int     `json:"pool_size"`
	Budget        int     `json:"budget"`
	Bootstrap     int     `json:"bootstrap"`
	Schedule      []Phase `json:"schedule"`
	BatchSize     int     `json:"batch_size"`
	Workers       int     `json:"workers"`
	Appraisal     string  `json:"appraisal"`
	EmbeddingHash string  `json:"embedding_hash"`
	ViewHash      string  `json:"view_hash"`
	// Seq is the sequence length of the inputs: the data owner's pool's,
	// or the model owner's -public texts' (0: none, any length).
	Seq int `json:"seq"`
	// Provider and ProviderParams describe how the party's provider makes
	// its correlations (beaver.Describe): both must be the peer's.
	Provider       string  `json:"provider"`
	ProviderParams string  `json:"provider_params,omitempty"`
	Epoch          uint64  `json:"epoch"`
	Resume         summary `json:"resume"`
	// Shards is K of a sharded run (ModelOwner.Shards), absent (0)
	// without one, so that an unsharded hello is unchanged.
	Shards int `json:"shards,omitempty"`
	// PoolRoot is the data owner's commitment to its pool (64 hex digits;
	// absent without one): announced before the coin toss fixes the
	// bootstrap (see DataOwner.Items).
	PoolRoot string `json:"pool_root,omitempty"`
}

// newHello builds this party's hello.
func newHello(party int, p Params, embHash string, seq int, prov beaver.Description, epoch uint64, sum summary) hello {
	h := hello{Version: ProtocolVersion, Party: party, FracBits: p.FixedPoint.FracBits, IntBits: p.FixedPoint.IntBits,
		PoolSize: p.PoolSize, Budget: p.Budget, Bootstrap: p.Bootstrap, Schedule: p.Schedule, BatchSize: p.BatchSize,
		Workers: p.Workers, Appraisal: string(p.Appraisal), EmbeddingHash: embHash, Seq: seq,
		Provider: prov.Source, ProviderParams: prov.Params, Epoch: epoch, Resume: sum}
	h.ViewHash = viewHash(p, embHash)
	return h
}

// viewHash is the SHA-256 of this party's view of the public parameters.
func viewHash(p Params, embHash string) string {
	b, _ := json.Marshal(struct {
		V int
		P Params
		E string
	}{ProtocolVersion, p.protocolView(), embHash})
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// compareHello returns the first mismatch between the local and peer
// hellos: every public parameter both parties must pass alike, how their
// providers make the correlations (beaver.Describe: the peer binaries'
// -provider and the HE parameters) and the sequence length (when both
// announce one). Values are written in the syntax they are parsed from (a
// schedule as ParseSchedule reads it), hashes shortened (HashMismatch).
func compareHello(local, peer hello) error {
	str := func(v any) string { return fmt.Sprint(v) }
	none := func(s string) string {
		if s == "" {
			return "(none)"
		}
		return s
	}
	checks := []struct {
		field   string
		l, p    string
		differs bool
	}{
		{"version", str(local.Version), str(peer.Version), local.Version != peer.Version},
		{"party", str(local.Party), str(peer.Party) + " (both claim the same role)", local.Party == peer.Party},
		{"fixed_point.frac_bits", str(local.FracBits), str(peer.FracBits), local.FracBits != peer.FracBits},
		{"fixed_point.int_bits", str(local.IntBits), str(peer.IntBits), local.IntBits != peer.IntBits},
		{"provider", none(local.Provider), none(peer.Provider), local.Provider != peer.Provider},
		{"provider_params", "", "", local.ProviderParams != peer.ProviderParams},
		{"pool_size", str(local.PoolSize), str(peer.PoolSize), local.PoolSize != peer.PoolSize},
		{"budget", str(local.Budget), str(peer.Budget), local.Budget != peer.Budget},
		{"bootstrap", str(local.Bootstrap), str(peer.Bootstrap), local.Bootstrap != peer.Bootstrap},
		{"schedule", FormatSchedule(local.Schedule), FormatSchedule(peer.Schedule), !slices.Equal(local.Schedule, peer.Schedule)},
		{"batch_size", str(local.BatchSize), str(peer.BatchSize), local.BatchSize != peer.BatchSize},
		{"workers", str(local.Workers), str(peer.Workers), local.Workers != peer.Workers},
		{"appraisal", none(local.Appraisal), none(peer.Appraisal), local.Appraisal != peer.Appraisal},
		{"seq", str(local.Seq), str(peer.Seq), local.Seq > 0 && peer.Seq > 0 && local.Seq != peer.Seq},
		{"embedding_hash", "", "", local.EmbeddingHash != peer.EmbeddingHash},
		{"view_hash", "", "", local.ViewHash != peer.ViewHash},
		{"shards", str(local.Shards), str(peer.Shards), local.Shards != peer.Shards},
	}
	for _, c := range checks {
		if !c.differs {
			continue
		}
		switch c.field {
		case "provider_params":
			return HashMismatch(c.field, local.ProviderParams, peer.ProviderParams)
		case "embedding_hash":
			me := HashMismatch(c.field, local.EmbeddingHash, peer.EmbeddingHash)
			me.Hint = EmbeddingHint
			return me
		case "view_hash":
			return HashMismatch(c.field, local.ViewHash, peer.ViewHash)
		}
		return &MismatchError{Field: c.field, Local: c.l, Peer: c.p}
	}
	return nil
}

// EpochError is the handshake's refusal of the peer's epoch: outside
// 1..MaxEpoch−1 (epoch e places material at e<<EpochShift, which must not
// wrap onto another epoch's), or more than MaxEpochLead ahead of this
// party's, which no sequence of honest restarts explains. Nothing was drawn
// in the run.
type EpochError struct {
	// Local is this party's epoch (already counting this run), Peer the
	// one the peer announced.
	Local, Peer uint64
}

// Error says which bound the peer's epoch breaks.
func (e *EpochError) Error() string {
	if e.Peer == 0 || e.Peer >= MaxEpoch {
		return fmt.Sprintf("selection: handshake: the peer announces epoch %d, outside 1..%d; refused", e.Peer, MaxEpoch-1)
	}
	return fmt.Sprintf("selection: handshake: the peer announces epoch %d, %d ahead of this party's %d (at most %d: each run adds one); refused. "+
		"If the peer really started that many runs that never reached this party, raise \"epoch\" in this party's state file to %d",
		e.Peer, e.Peer-e.Local, e.Local, MaxEpochLead, e.Peer-MaxEpochLead)
}

// checkEpoch refuses the peer's epoch peer against this party's mine (see
// EpochError).
func checkEpoch(mine, peer uint64) error {
	if peer == 0 || peer >= MaxEpoch || peer > mine && peer-mine > MaxEpochLead {
		return &EpochError{Local: mine, Peer: peer}
	}
	return nil
}

// checkPeerHello bounds the numbers of the peer's hello that compareHello
// does not compare with this party's own and that become positions, sizes
// or loop bounds: the epoch (checkEpoch), the sequence length (the model
// owner sizes the proxies' inputs by the data owner's) and the resume
// summary (checkSummary).
func checkPeerHello(mine, peer hello, p Params) error {
	if err := checkEpoch(mine.Epoch, peer.Epoch); err != nil {
		return err
	}
	if peer.Seq < 0 || peer.Seq > secure.MaxWidth {
		return fmt.Errorf("selection: handshake: the peer announces sequences of %d tokens (0..%d); refused", peer.Seq, secure.MaxWidth)
	}
	if err := checkSummary(peer.Resume, p); err != nil {
		return fmt.Errorf("selection: handshake: the peer's resume summary: %w; refused", err)
	}
	return nil
}

// checkSummary refuses a resume summary that no checkpoint of the
// parameters p (after defaults) describes: more phases than the schedule,
// phases before the bootstrap, and per phase batch numbers that are not
// ascending and distinct below the batch count of the whole candidate
// pool cut into the phase's batch size (Params.PhaseBatchSize), or epochs
// that do not pair up with them or lie outside 1..MaxEpoch−1.
func checkSummary(s summary, p Params) error {
	if len(s.Phases) > len(p.Schedule) {
		return fmt.Errorf("%d phases, the schedule has %d", len(s.Phases), len(p.Schedule))
	}
	if len(s.Phases) > 0 && !s.BootstrapDone {
		return fmt.Errorf("phases before the bootstrap")
	}
	for i, ph := range s.Phases {
		bs := p.PhaseBatchSize(i)
		if bs <= 0 {
			return fmt.Errorf("phase %d: batch size %d", i+1, bs)
		}
		nb := p.phaseBatches(i, p.PoolSize-p.Bootstrap)
		if len(ph.Batches) > nb || len(ph.Epochs) != len(ph.Batches) {
			return fmt.Errorf("phase %d: %d batches with %d epochs (at most %d batches)", i+1, len(ph.Batches), len(ph.Epochs), nb)
		}
		for j, b := range ph.Batches {
			if b < 0 || b >= nb || j > 0 && b <= ph.Batches[j-1] {
				return fmt.Errorf("phase %d: batch numbers not ascending and distinct in 0..%d", i+1, nb-1)
			}
		}
		for _, e := range ph.Epochs {
			if e == 0 || e >= MaxEpoch {
				return fmt.Errorf("phase %d: batch of epoch %d", i+1, e)
			}
		}
	}
	return nil
}

// Largest messages accepted on StreamControl, each checked by the receive
// on the size the peer announces, before anything is allocated or decoded
// (see also archsMessageBound and bootstrapMessageBound).
const (
	// maxControlMessage bounds a hello whatever the parameters (see
	// maxHelloMessage).
	maxControlMessage = 16 << 20
	// helloBase bounds a hello's public parameters and schedule.
	helloBase = 1 << 20
	// maxCoinMessage bounds a coin-toss message: a SHA-256 commitment, a
	// contribution or an opening (32 bytes each).
	maxCoinMessage = 32
)

// maxHelloMessage bounds the peer's hello under this side's parameters p:
// the parameters (helloBase) and a resume summary of at most every batch of
// every phase done (of the phase's batch size), each a batch number and an epoch of at most
// maxJSONNumber bytes; never more than maxControlMessage.
func maxHelloMessage(p Params) int {
	var batches int64
	for i := range p.Schedule {
		batches += int64(p.PoolSize)/int64(max(p.PhaseBatchSize(i), 1)) + 1
	}
	n := helloBase + batches*2*maxJSONNumber
	return int(min(n, maxControlMessage))
}

// lateMessageWait bounds how long exchangeJSON reads a peer's message
// after its context ended: the message is queued already when the peer's
// abort arrived, so the wait only ends a read of a connection that died,
// or of a peer that aborted before sending it. A variable only so that
// the package's tests, a dozen of which wait it out, shorten it
// (TestMain).
var lateMessageWait = time.Second

// exchangeJSON sends v and receives the peer's message, of at most max
// bytes, into out. When the peer's message arrived but the send failed (the
// peer already left), or ctx ended (the peer's abort) with the message
// queued, out is filled and the error returned, so the caller can still
// report what the peer said.

func exchangeJSON(ctx context.Context, st *transport.Stream, v, out any, max int) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- st.SendBytes(ctx, b) }()
	rb, rerr := st.RecvBytes(ctx, max)
	serr := <-errc
	if rerr != nil {
		if ctx.Err() != nil {
			// The peer's abort (which cancels ctx) follows its message on
			// the same connection, so that message is already queued: a
			// receive on a cancelled context picks at random between the
			// two. Read it, so the caller can tell why the peer left.
			lateCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lateMessageWait)
			if lb, lerr := st.RecvBytes(lateCtx, max); lerr == nil && len(lb) <= max {
				_ = json.Unmarshal(lb, out) // best effort: the error below stands
			}
			cancel()
		}
		if serr != nil {
			return fmt.Errorf("send: %w", serr)
		}
		return fmt.Errorf("receive: %w", rerr)
	}
	if len(rb) > max {
		return withCode(AbortLimit, fmt.Errorf("peer message of %d bytes", len(rb)))
	}
	if err := json.Unmarshal(rb, out); err != nil {
		return withCode(AbortProtocol, fmt.Errorf("decode peer message: %w", err))
	}
	if serr != nil {
		return fmt.Errorf("send: %w", serr)
	}
	return nil
}

// The coin toss is commit–reveal: party 0 commits to r0 with SHA-256
// (coinCommit), party 1 sends r1, party 0 opens r0; the seed is
// SHA-256(r0‖r1) (coinSeed). Neither party can bias it: party 0 is bound by
// its commitment before it sees r1, and party 1 sees only a hiding
// commitment before choosing r1. The two sides are tossCoinModelOwner and
// tossCoinDataOwner.

// coinContribution draws this party's 32-byte contribution to the coin
// toss from src (crypto/rand when nil; tests fix it to repeat a selection).
func coinContribution(src io.Reader) ([32]byte, error) {
	if src == nil {
		src = rand.Reader
	}
	var r [32]byte
	if _, err := io.ReadFull(src, r[:]); err != nil {
		return r, fmt.Errorf("selection: coin toss: %w", err)
	}
	return r, nil
}

// The tests of selection's subpackages fix a party's coin through
// testhook (the owners' coinSource).
func init() {
	testhook.SetCoinSource = func(owner any, src io.Reader) {
		switch o := owner.(type) {
		case *ModelOwner:
			o.coinSource = src
		case *DataOwner:
			o.coinSource = src
		}
	}
}

// coinCommit is party 0's commitment to its contribution r.
func coinCommit(r []byte) []byte {
	h := sha256.New()
	h.Write([]byte("selectformer/selection/coin-commit/v1"))
	h.Write(r)
	return h.Sum(nil)
}

// coinSeed is the joint coin of the contributions r0 and r1.
func coinSeed(r0, r1 []byte) share.Seed {
	h := sha256.New()
	h.Write([]byte("selectformer/selection/coin-seed/v1"))
	h.Write(r0)
	h.Write(r1)
	var s share.Seed
	copy(s[:], h.Sum(nil))
	return s
}

// dealerSession derives the dealer session id from the joint coin seed =
// SHA-256(r0‖r1): it depends on both parties' contributions, so neither
// party alone can make a new selection reuse an earlier one's id (and with
// it the earlier correlated randomness); a resumed selection keeps its coin
// and so its session, at counters of a new epoch.
func dealerSession(seed share.Seed) beaver.SessionID {
	h := sha256.New()
	h.Write([]byte("selectformer/selection/dealer-session/v1"))
	h.Write(seed[:])
	var id beaver.SessionID
	copy(id[:], h.Sum(nil))
	return id
}
