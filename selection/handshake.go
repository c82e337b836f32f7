package selection

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/proxy/model"
	"github.com/selectformer/selectformer/proxy/nn"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// MismatchError is the handshake's error when the two parties disagree on a
// public parameter: it names the field and both values.
type MismatchError struct {
	// Field is the parameter's name, e.g. "budget".
	Field string
	// Local and Peer are the two values, formatted.
	Local, Peer string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("selection: handshake: %s mismatch: local %s, peer %s", e.Field, e.Local, e.Peer)
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
	Schedule      []Step  `json:"schedule"`
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
	}{ProtocolVersion, p, embHash})
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
		return fmt.Errorf("peer message of %d bytes", len(rb))
	}
	if err := json.Unmarshal(rb, out); err != nil {
		return fmt.Errorf("decode peer message: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("send: %w", serr)
	}
	return nil
}

// coinToss runs the commit–reveal coin toss: party 0 commits to r0 with
// SHA-256, party 1 sends r1, party 0 opens r0; the seed is SHA-256(r0‖r1).
// Neither party can bias it: party 0 is bound by its commitment before it
// sees r1, and party 1 sees only a hiding commitment before choosing r1.
func coinToss(ctx context.Context, st *transport.Stream, party int) (share.Seed, error) {
	var seed share.Seed
	var mine [32]byte
	if _, err := rand.Read(mine[:]); err != nil {
		return seed, fmt.Errorf("selection: coin toss: %w", err)
	}
	commit := func(r []byte) []byte {
		h := sha256.New()
		h.Write([]byte("selectformer/selection/coin-commit/v1"))
		h.Write(r)
		return h.Sum(nil)
	}
	finish := func(r0, r1 []byte) share.Seed {
		h := sha256.New()
		h.Write([]byte("selectformer/selection/coin-seed/v1"))
		h.Write(r0)
		h.Write(r1)
		var s share.Seed
		copy(s[:], h.Sum(nil))
		return s
	}
	if party == 0 {
		if err := st.SendBytes(ctx, commit(mine[:])); err != nil {
			return seed, fmt.Errorf("selection: coin toss: send commitment: %w", err)
		}
		r1, err := st.RecvBytes(ctx)
		if err != nil {
			return seed, fmt.Errorf("selection: coin toss: receive: %w", err)
		}
		if len(r1) != 32 {
			return seed, fmt.Errorf("selection: coin toss: peer coin of %d bytes", len(r1))
		}
		if err := st.SendBytes(ctx, mine[:]); err != nil {
			return seed, fmt.Errorf("selection: coin toss: open: %w", err)
		}
		return finish(mine[:], r1), nil
	}
	c, err := st.RecvBytes(ctx)
	if err != nil {
		return seed, fmt.Errorf("selection: coin toss: receive commitment: %w", err)
	}
	if len(c) != sha256.Size {
		return seed, fmt.Errorf("selection: coin toss: commitment of %d bytes", len(c))
	}
	if err := st.SendBytes(ctx, mine[:]); err != nil {
		return seed, fmt.Errorf("selection: coin toss: send: %w", err)
	}
	r0, err := st.RecvBytes(ctx)
	if err != nil {
		return seed, fmt.Errorf("selection: coin toss: receive opening: %w", err)
	}
	if len(r0) != 32 || subtle.ConstantTimeCompare(commit(r0), c) != 1 {
		return seed, fmt.Errorf("selection: coin toss: the model owner's opening does not match its commitment")
	}
	return finish(r0, mine[:]), nil
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

// EmbeddingHash returns the hex SHA-256 of m's public embedding tables (token,
// position and type embeddings and the embedding LayerNorm, or ViT's patch
// projection, class token and position embeddings), compared in the handshake
// so that both parties embed with the same public checkpoint.
func EmbeddingHash(m *model.Model) (string, error) {
	if m == nil {
		return "", fmt.Errorf("selection: embedding hash of a nil model")
	}
	h := sha256.New()
	fmt.Fprintf(h, "family=%s hidden=%d\n", m.Config.Family, m.Config.Hidden)
	add := func(name string, p *nn.Param) {
		if p == nil || p.Value == nil {
			return
		}
		fmt.Fprintf(h, "%s %v\n", name, p.Value.Shape)
		var b [8]byte
		for _, v := range p.Value.Data {
			u := math.Float64bits(v)
			for i := range b {
				b[i] = byte(u >> (8 * i))
			}
			h.Write(b[:])
		}
	}
	if m.Word != nil {
		add("word", m.Word.Table)
	}
	if m.Position != nil {
		add("position", m.Position.Table)
	}
	if m.TokenType != nil {
		add("token_type", m.TokenType.Table)
	}
	if m.EmbLN != nil {
		add("emb_ln.gamma", m.EmbLN.Gamma)
		add("emb_ln.beta", m.EmbLN.Beta)
	}
	if m.Patch != nil {
		add("patch.w", m.Patch.W)
		add("patch.b", m.Patch.B)
	}
	add("cls", m.CLS)
	add("pos_emb", m.PosEmb)
	return hex.EncodeToString(h.Sum(nil)), nil
}
