package selection

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"github.com/selectformer/selectformer/beaver"
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
	Seq           int     `json:"seq"`
	Epoch         uint64  `json:"epoch"`
	Resume        summary `json:"resume"`
}

// newHello builds this party's hello.
func newHello(party int, p Params, embHash string, seq int, epoch uint64, sum summary) hello {
	h := hello{Version: ProtocolVersion, Party: party, FracBits: p.FixedPoint.FracBits, IntBits: p.FixedPoint.IntBits,
		PoolSize: p.PoolSize, Budget: p.Budget, Bootstrap: p.Bootstrap, Schedule: p.Schedule, BatchSize: p.BatchSize,
		Workers: p.Workers, Appraisal: string(p.Appraisal), EmbeddingHash: embHash, Seq: seq, Epoch: epoch, Resume: sum}
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

// compareHello returns the first mismatch between the local and peer hellos.
func compareHello(local, peer hello) error {
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	checks := []struct {
		field   string
		l, p    any
		differs bool
	}{
		{"version", local.Version, peer.Version, local.Version != peer.Version},
		{"party", local.Party, 1 - peer.Party, local.Party == peer.Party},
		{"fixed_point.frac_bits", local.FracBits, peer.FracBits, local.FracBits != peer.FracBits},
		{"fixed_point.int_bits", local.IntBits, peer.IntBits, local.IntBits != peer.IntBits},
		{"pool_size", local.PoolSize, peer.PoolSize, local.PoolSize != peer.PoolSize},
		{"budget", local.Budget, peer.Budget, local.Budget != peer.Budget},
		{"bootstrap", local.Bootstrap, peer.Bootstrap, local.Bootstrap != peer.Bootstrap},
		{"schedule", js(local.Schedule), js(peer.Schedule), js(local.Schedule) != js(peer.Schedule)},
		{"batch_size", local.BatchSize, peer.BatchSize, local.BatchSize != peer.BatchSize},
		{"workers", local.Workers, peer.Workers, local.Workers != peer.Workers},
		{"appraisal", local.Appraisal, peer.Appraisal, local.Appraisal != peer.Appraisal},
		{"embedding_hash", local.EmbeddingHash, peer.EmbeddingHash, local.EmbeddingHash != peer.EmbeddingHash},
		{"view_hash", local.ViewHash, peer.ViewHash, local.ViewHash != peer.ViewHash},
	}
	for _, c := range checks {
		if c.differs {
			if c.field == "party" {
				return &MismatchError{Field: "party", Local: fmt.Sprint(local.Party), Peer: fmt.Sprint(peer.Party) + " (both claim the same role)"}
			}
			if c.field == "embedding_hash" {
				l, p := shortHashes(local.EmbeddingHash, peer.EmbeddingHash)
				return &MismatchError{Field: c.field, Local: l, Peer: p, Hint: EmbeddingHint}
			}
			return &MismatchError{Field: c.field, Local: fmt.Sprint(c.l), Peer: fmt.Sprint(c.p)}
		}
	}
	return nil
}

// maxControlMessage bounds the clear control messages (hello, archs).
const maxControlMessage = 16 << 20

// exchangeJSON sends v and receives the peer's message into out. When the
// peer's message arrived but the send failed (the peer already left), out is
// filled and the send error returned, so the caller can still report what
// the peer said.
func exchangeJSON(ctx context.Context, st *transport.Stream, v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- st.SendBytes(ctx, b) }()
	rb, rerr := st.RecvBytes(ctx)
	serr := <-errc
	if rerr != nil {
		if serr != nil {
			return fmt.Errorf("send: %w", serr)
		}
		return fmt.Errorf("receive: %w", rerr)
	}
	if len(rb) > maxControlMessage {
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
