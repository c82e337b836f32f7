package protocol

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// Session is one party's end of a two-party computation on one stream.
// A Session is not safe for concurrent use; run concurrent batches on
// separate sessions over separate streams.
type Session struct {
	party  int
	stream *transport.Stream
	// dry marks a rehearsal session (NewRehearsal): it has no stream, sends
	// nothing, receives zeros and multiplies no matrices; sid is its
	// stream id.
	dry bool
	sid uint32
	// src is the session's provider (Ahead swaps it for the duration of a
	// computation), and prov the protocols' typed view of it, drawing
	// through draws (gate.go: a draw that must wait gives the compute slot
	// back).
	src  beaver.Provider
	prov beaver.Typed
	fp   share.FixedPoint

	// recvTap, when set (SetReceiveTap), sees every word message this party
	// receives through Exchange and RecvWords.
	recvTap func(words []uint64)

	// inputPRG[i] expands the shares that party i's inputs give the other
	// party: both parties hold the seed party i chose at setup.
	inputPRG [2]*share.PRG

	// gemm, when set (SetGEMM), runs this session's local matrix products
	// instead of the process-wide share.GEMM().
	gemm share.GEMMBackend

	// gate, when set (Enter), is the compute gate of which this session
	// holds a slot between its exchanges; prio its priority there.
	gate *ComputeGate
	prio int64
	held bool

	// weightsOnline marks a rehearsal of a computation whose provider makes
	// weight triples inside it (RehearseFor): its products with the model
	// owner's weights draw nothing. onlineBase and online name a real
	// session's such items (nextWeightItem).
	weightsOnline bool
	onlineBase    uint64
	online        uint64
}

// NewSession sets up party's end on stream: it checks the parameters and
// exchanges fresh input-sharing seeds with the peer (one round of 32 bytes each
// way). prov must serve the same party.
func NewSession(ctx context.Context, party int, stream *transport.Stream, prov beaver.Provider, fp share.FixedPoint) (*Session, error) {
	if party != 0 && party != 1 {
		return nil, fmt.Errorf("protocol: party %d, want 0 or 1", party)
	}
	if prov == nil || prov.Party() != party {
		return nil, fmt.Errorf("protocol: provider for party %v given to party %d", providerParty(prov), party)
	}
	if err := fp.Validate(); err != nil {
		return nil, fmt.Errorf("protocol: %w", err)
	}
	mine, err := share.NewSeed()
	if err != nil {
		return nil, fmt.Errorf("protocol: session setup: %w", err)
	}
	if err := stream.SendBytes(ctx, mine[:]); err != nil {
		return nil, fmt.Errorf("protocol: session setup: send input seed: %w", err)
	}
	b, err := stream.RecvBytes(ctx, share.SeedSize) // the peer's input-sharing seed
	if err != nil {
		return nil, fmt.Errorf("protocol: session setup: receive input seed: %w", err)
	}
	if len(b) != share.SeedSize {
		return nil, fmt.Errorf("protocol: session setup: peer sent a %d-byte seed, want %d", len(b), share.SeedSize)
	}
	var theirs share.Seed
	copy(theirs[:], b)
	s := &Session{party: party, stream: stream, fp: fp, onlineBase: prov.Position(stream.ID())}
	s.setProvider(prov)
	domain := fmt.Sprintf("input/stream=%d", stream.ID())
	s.inputPRG[party] = share.NewPRG(mine, domain)
	s.inputPRG[1-party] = share.NewPRG(theirs, domain)
	return s, nil
}

// NewRehearsal returns a session that rehearses a computation without a
// peer: it runs every step of a protocol as party would on the stream with
// id streamID, but its exchanges go nowhere (what it sends is dropped, what
// it receives is zeros), its matrix products are skipped (their results
// are zeros) and its provider hands out zeros and records the requests.
// Its results are meaningless; what it is for is the sequence of requests
// a computation makes of its provider, which depends only on the public
// shapes and parameters, never on values: Rehearse returns it, to fetch
// the material ahead of the real run (Prefetch). Stream returns nil;
// StreamID returns streamID.
func NewRehearsal(party int, streamID uint32, fp share.FixedPoint) (*Session, error) {
	if party != 0 && party != 1 {
		return nil, fmt.Errorf("protocol: rehearsal as party %d, want 0 or 1", party)
	}
	if err := fp.Validate(); err != nil {
		return nil, fmt.Errorf("protocol: rehearsal: %w", err)
	}
	s := &Session{party: party, dry: true, sid: streamID, fp: fp, gemm: zeroGEMM{}}
	s.setProvider(&rehearsalProvider{party: party})
	var zero share.Seed
	domain := fmt.Sprintf("rehearsal/stream=%d", streamID)
	s.inputPRG[0] = share.NewPRG(zero, domain)
	s.inputPRG[1] = share.NewPRG(zero, domain)
	return s, nil
}

// Rehearsal reports whether s is a rehearsal session (NewRehearsal).
func (s *Session) Rehearsal() bool { return s.dry }

// zeroGEMM is a rehearsal's matrix backend: every product is zero.
type zeroGEMM struct{}

func (zeroGEMM) Name() string { return "rehearsal" }

func (zeroGEMM) MulWeights(c, a []uint64, batch, m int, w *share.WeightMatrix) error {
	clear(c)
	return nil
}

func (zeroGEMM) BatchMatMul(c, a, b []uint64, batch, m, k, n int) error {
	clear(c)
	return nil
}

func providerParty(p beaver.Provider) any {
	if p == nil {
		return "nil"
	}
	return p.Party()
}

// Party returns 0 (model owner) or 1 (data owner).
func (s *Session) Party() int { return s.party }

// FixedPoint returns the session's fixed-point encoding.
func (s *Session) FixedPoint() share.FixedPoint { return s.fp }

// Stream returns the session's transport stream (for cost accounting); nil
// for a rehearsal.
func (s *Session) Stream() *transport.Stream { return s.stream }

// Provider returns the session's source of correlated randomness, with the
// typed helpers (s.Provider().Triples(ctx, s.StreamID(), n), ...). Draws
// through it give the session's compute slot back while they wait (see
// ComputeGate); its Unwrap is the provider the session was given.
func (s *Session) Provider() beaver.Typed { return s.prov }

// setProvider makes p the session's provider.
func (s *Session) setProvider(p beaver.Provider) {
	s.src = p
	s.prov = beaver.Typed{Provider: &draws{Provider: p, s: s}}
}

// ShareInput secret-shares a tensor owned by party owner, at no communication:
// the owner passes its clear tensor x and receives x − r; the other party
// passes nil plus the shape and receives r, both r being the next words of the
// owner's input stream.
func (s *Session) ShareInput(owner int, x *share.Tensor, shape ...int) (*share.Tensor, error) {
	if owner != 0 && owner != 1 {
		return nil, fmt.Errorf("protocol: share input of party %d", owner)
	}
	prg := s.inputPRG[owner]
	if owner == s.party {
		if x == nil {
			return nil, fmt.Errorf("protocol: party %d shares its input but passed none", owner)
		}
		// Every word is written by OwnerShare, so the words may come from the
		// scratch pool; the caller owns them (and may hand them back with
		// share.PutWords when done).
		out := &share.Tensor{Shape: append([]int(nil), x.Shape...), Data: share.GetWords(x.Len())}
		if err := share.OwnerShare(out.Data, x.Data, prg); err != nil {
			return nil, fmt.Errorf("protocol: share input: %w", err)
		}
		return out, nil
	}
	out, err := share.NewTensor(shape...)
	if err != nil {
		return nil, fmt.Errorf("protocol: share input of party %d: %w", owner, err)
	}
	share.PeerShare(out.Data, prg)
	return out, nil
}

// Reveal opens a shared tensor to both parties: one round, each party sending
// its share (8 bytes per element).
func (s *Session) Reveal(ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
	theirs := make([]uint64, x.Len())
	if err := s.Exchange(ctx, x.Data, theirs); err != nil {
		return nil, fmt.Errorf("protocol: reveal %v: %w", x.Shape, err)
	}
	out := &share.Tensor{Shape: append([]int(nil), x.Shape...), Data: theirs}
	if err := share.AddVec(out.Data, out.Data, x.Data); err != nil {
		return nil, err
	}
	return out, nil
}

// RevealTo opens a shared tensor to party to only: one round, the other party
// sending its share. The receiver gets the secret; the sender gets nil.
func (s *Session) RevealTo(ctx context.Context, to int, x *share.Tensor) (*share.Tensor, error) {
	if to != 0 && to != 1 {
		return nil, fmt.Errorf("protocol: reveal to party %d", to)
	}
	if s.party != to {
		if err := s.SendWords(ctx, x.Data); err != nil {
			return nil, fmt.Errorf("protocol: reveal %v to party %d: %w", x.Shape, to, err)
		}
		return nil, nil
	}
	theirs := make([]uint64, x.Len())
	if err := s.RecvWords(ctx, theirs); err != nil {
		return nil, fmt.Errorf("protocol: reveal %v to party %d: %w", x.Shape, to, err)
	}
	out := &share.Tensor{Shape: append([]int(nil), x.Shape...), Data: theirs}
	if err := share.AddVec(out.Data, out.Data, x.Data); err != nil {
		return nil, err
	}
	return out, nil
}

// StreamID returns the id of the session's stream, which is also the stream
// under which the session draws correlated randomness from its Provider.
func (s *Session) StreamID() uint32 {
	if s.dry {
		return s.sid
	}
	return s.stream.ID()
}

// Exchange sends send to the peer and receives the peer's message of
// len(recv) words into recv, concurrently: one round, 8·len(send) bytes of
// payload plus the transport's framing. Protocols should talk through
// Exchange, SendWords and RecvWords rather than the raw stream so that tests
// can inspect what a party receives.
func (s *Session) Exchange(ctx context.Context, send, recv []uint64) error {
	if s.dry {
		return s.rehearse(ctx, recv)
	}
	s.waitStart()
	if err := s.waitEnd(ctx, s.stream.Exchange(ctx, send, recv)); err != nil {
		return err
	}
	if s.recvTap != nil {
		s.recvTap(recv)
	}
	return nil
}

// SetReceiveTap installs f to see every word message this party receives
// through the session from now on (nil removes it): an audit hook for
// checking what a party's view consists of, e.g. that it is uniformly random
// whatever the other party's secret. f runs synchronously on the protocol's
// goroutine and must neither keep nor modify the slice.
func (s *Session) SetReceiveTap(f func(words []uint64)) { s.recvTap = f }

// SendWords sends w to the peer alone: one round for this party.
func (s *Session) SendWords(ctx context.Context, w []uint64) error {
	if s.dry {
		return s.rehearse(ctx, nil)
	}
	// A send does not wait for the peer (beyond flow control): the
	// session keeps its compute slot.
	return s.stream.SendWords(ctx, w)
}

// RecvWords receives the peer's message of len(dst) words: one round for
// this party.
func (s *Session) RecvWords(ctx context.Context, dst []uint64) error {
	if s.dry {
		return s.rehearse(ctx, dst)
	}
	s.waitStart()
	if err := s.waitEnd(ctx, s.stream.RecvWords(ctx, dst)); err != nil {
		return err
	}
	if s.recvTap != nil {
		s.recvTap(dst)
	}
	return nil
}

// rehearse is a rehearsal's exchange: it receives zeros into recv.
func (s *Session) rehearse(ctx context.Context, recv []uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	clear(recv)
	return nil
}
