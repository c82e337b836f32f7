package ot

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/selectformer/selectformer/beaver"
)

// scriptConn plays a peer whose every message is cut from data (cycled, or
// zeros when data is empty) at exactly the length the caller expects, as
// the transport guarantees; sends are dropped. It fails once data has been
// consumed limit times, so a run always ends.
type scriptConn struct {
	data  []byte
	pos   int
	calls int
	limit int
}

var errScriptDone = errors.New("script: no more peer messages")

func (s *scriptConn) fill(dst []uint64) error {
	if s.calls++; s.calls > s.limit {
		return errScriptDone
	}
	for i := range dst {
		var b [8]byte
		for k := range b {
			if len(s.data) > 0 {
				b[k] = s.data[s.pos%len(s.data)]
				s.pos++
			}
		}
		dst[i] = binary.LittleEndian.Uint64(b[:])
	}
	return nil
}

func (s *scriptConn) Exchange(ctx context.Context, send, recv []uint64) error { return s.fill(recv) }
func (s *scriptConn) SendWords(ctx context.Context, w []uint64) error         { return nil }
func (s *scriptConn) RecvWords(ctx context.Context, dst []uint64) error       { return s.fill(dst) }

// FuzzBaseMessages feeds arbitrary bytes as each base-OT message a peer
// sends (A to the receiver, B to the sender, E to the receiver): each must
// be refused with an error or accepted, never panic. Only well-formed
// Ristretto255 encodings of the right length get past the decoders.
func FuzzBaseMessages(f *testing.F) {
	bs, a, err := newBaseSender()
	if err != nil {
		f.Fatal(err)
	}
	br, b, err := newBaseReceiver(a, Block{0x5555, 0xaaaa})
	if err != nil {
		f.Fatal(err)
	}
	e, err := bs.respond(b)
	if err != nil {
		f.Fatal(err)
	}
	if _, err := br.finish(e); err != nil {
		f.Fatal(err)
	}
	f.Add(a)
	f.Add(b)
	f.Add(e)
	f.Add([]byte{})
	f.Add(make([]byte, baseMsgALen))
	f.Fuzz(func(t *testing.T, msg []byte) {
		if r, _, err := newBaseReceiver(msg, Block{1, 2}); err == nil {
			if r == nil {
				t.Fatal("nil receiver without error")
			}
		}
		s, _, err := newBaseSender()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.respond(msg); err == nil {
			if _, err := s.respond(b); err == nil {
				t.Fatal("base sender responded twice")
			}
		}
		r, _, err := newBaseReceiver(a, Block{3, 4})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.finish(msg); err == nil && len(msg) != baseMsgELen {
			t.Fatalf("E of %d bytes accepted", len(msg))
		}
	})
}

// FuzzSetupPeer runs Setup against a scripted peer whose three messages are
// arbitrary: it returns an error or a session, never panics or hangs.
func FuzzSetupPeer(f *testing.F) {
	sid := beaver.SessionID{7}
	f.Add(0, sid[:])
	f.Add(1, []byte{})
	f.Add(0, make([]byte, 8*msgAWords))
	f.Fuzz(func(t *testing.T, party int, data []byte) {
		c := &scriptConn{data: data, limit: 3}
		s, err := Setup(context.Background(), c, party&1, sid)
		if err == nil && s == nil {
			t.Fatal("nil session without error")
		}
	})
}

// fakeSession returns a session with random base-OT seeds, as Setup would
// leave it, without a peer.
func fakeSession(t testing.TB, party int) *Session { return fakeSessionK(t, party, spokenK) }

// fakeSessionK is fakeSession with SoftSpokenOT's k.
func fakeSessionK(t testing.TB, party, k int) *Session {
	s := &Session{party: party, sid: beaver.SessionID{1}, ext: mustSpoken(k), gens: make(map[uint32]bool)}
	s.pi = newFixedAES([16]byte{byte(party), 1})
	s.prg = newFixedAES([16]byte{byte(party), 2})
	s.delta = Block{0x0123456789abcdef, 0xfedcba9876543210}
	for i := range baseCount {
		s.sendSeeds[i] = [seedLen]byte{byte(i), 1}
		s.recvSeeds[i] = [2][seedLen]byte{{byte(i), 2}, {byte(i), 3}}
	}
	return s
}

// FuzzGenPeer runs every generator against a scripted peer whose IKNP
// matrices and corrections are arbitrary words: a generator must return its
// material or an error, never panic, whatever the peer sends.
func FuzzGenPeer(f *testing.F) {
	f.Add(uint8(0), uint8(0), uint8(3), []byte{1, 2, 3})
	f.Add(uint8(1), uint8(3), uint8(70), []byte{})
	f.Add(uint8(1), uint8(9), uint8(130), []byte{0xff})
	f.Add(uint8(0), uint8(10), uint8(65), []byte{4, 5})
	f.Add(uint8(1), uint8(23), uint8(200), []byte{})
	f.Add(uint8(0), uint8(11), uint8(65), []byte{7})
	f.Fuzz(func(t *testing.T, party, op, size uint8, data []byte) {
		s := fakeSession(t, int(party&1))
		g, err := s.NewGen(&scriptConn{data: data, limit: 8}, 1)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		n := int(size)
		var w []uint64
		if g.party == 0 {
			w = make([]uint64, 2*n)
		}
		switch op % 12 {
		case 0:
			_, err = g.Triples(ctx, n)
		case 1:
			_, err = g.SquarePairs(ctx, n)
		case 2:
			_, err = g.MatTriples(ctx, 1, n%5+1, 2, n%3+1)
		case 3:
			_, err = g.WeightTriples(ctx, w[:min(len(w), 2*(n%4+1))], n%7+1, 2, n%4+1)
		case 4:
			_, err = g.WeightVectorTriples(ctx, w[:min(len(w), n)], 3, n)
		case 5:
			_, err = g.ANDTriples(ctx, n)
		case 6:
			_, err = g.CrossANDTriples(ctx, n)
		case 7:
			_, err = g.WrapPairs(ctx, n, 16)
		case 8:
			_, err = g.BitPairs(ctx, n)
		case 9:
			_, err = g.RandomOTs(ctx, n, int(op/12)&1)
		case 10:
			_, err = g.RowBitTriples(ctx, n, int(op/12)%4+1)
		case 11:
			_, err = g.SquareProducts(ctx, n)
		}
		_ = err
	})
}
