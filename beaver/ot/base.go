package ot

import (
	"crypto/rand"
	"fmt"

	"github.com/cloudflare/circl/group"
	"github.com/cloudflare/circl/ot/simot"
)

// Base OTs: 128 instances of the "simplest OT" of Chou and Orlandi as
// implemented by circl's ot/simot, over Ristretto255. Each instance has its
// own sender randomness a (simot keeps one sender state per instance) and
// transfers one of two 16-byte random seeds, sealed with AES-GCM under a key
// hashed (SHAKE128) from the transcript and the shared point.
//
// Messages (all fixed-size, checked before any byte reaches circl):
//
//	A: 128 × 32-byte Ristretto255 points (sender → receiver)
//	B: 128 × 32-byte points (receiver → sender)
//	E: 128 × (e0 ‖ e1), each 44 bytes (12-byte nonce, 16-byte seed, 16-byte tag)
const (
	baseCount   = 128
	seedLen     = 16
	pointLen    = 32
	sealedLen   = 12 + seedLen + 16
	baseMsgALen = baseCount * pointLen
	baseMsgBLen = baseCount * pointLen
	baseMsgELen = baseCount * 2 * sealedLen
)

var baseGroup = group.Ristretto255

// baseSender is the sender side of the 128 base OTs: it knows both seeds of
// every instance.
type baseSender struct {
	s     [baseCount]simot.Sender
	seeds [baseCount][2][seedLen]byte
	used  bool
}

// newBaseSender draws the seed pairs and returns the A message.
func newBaseSender() (_ *baseSender, _ []byte, err error) {
	defer guard("base OT sender", &err)
	bs := &baseSender{}
	msg := make([]byte, 0, baseMsgALen)
	for i := range bs.s {
		for b := range 2 {
			if _, err := rand.Read(bs.seeds[i][b][:]); err != nil {
				return nil, nil, fmt.Errorf("base OT sender: random seeds: %w", err)
			}
		}
		A := bs.s[i].InitSender(baseGroup, bs.seeds[i][0][:], bs.seeds[i][1][:], i)
		enc, err := A.MarshalBinary()
		if err != nil {
			return nil, nil, fmt.Errorf("base OT sender %d: encode A: %w", i, err)
		}
		if len(enc) != pointLen {
			return nil, nil, fmt.Errorf("base OT sender %d: A encodes to %d bytes, want %d", i, len(enc), pointLen)
		}
		msg = append(msg, enc...)
	}
	return bs, msg, nil
}

// decodePoints parses n 32-byte Ristretto255 points, refusing non-canonical
// encodings and the identity.
func decodePoints(msg []byte, n int, what string) ([]group.Element, error) {
	if len(msg) != n*pointLen {
		return nil, fmt.Errorf("%s: %d bytes, want %d", what, len(msg), n*pointLen)
	}
	out := make([]group.Element, n)
	for i := range out {
		e := baseGroup.NewElement()
		if err := e.UnmarshalBinary(msg[i*pointLen : (i+1)*pointLen]); err != nil {
			return nil, fmt.Errorf("%s: point %d: %w", what, i, err)
		}
		if e.IsIdentity() {
			return nil, fmt.Errorf("%s: point %d is the identity", what, i)
		}
		out[i] = e
	}
	return out, nil
}

// respond takes the receiver's B message and returns the E message. A base
// sender responds once: simot forbids reusing the sender randomness.
func (bs *baseSender) respond(msgB []byte) (_ []byte, err error) {
	defer guard("base OT sender", &err)
	if bs.used {
		return nil, fmt.Errorf("base OT sender: already responded")
	}
	Bs, err := decodePoints(msgB, baseCount, "base OT message B")
	if err != nil {
		return nil, err
	}
	bs.used = true
	out := make([]byte, 0, baseMsgELen)
	for i, B := range Bs {
		e0, e1 := bs.s[i].Round2Sender(B)
		if len(e0) != sealedLen || len(e1) != sealedLen {
			return nil, fmt.Errorf("base OT sender %d: ciphertexts of %d and %d bytes, want %d", i, len(e0), len(e1), sealedLen)
		}
		out = append(out, e0...)
		out = append(out, e1...)
	}
	return out, nil
}

// baseReceiver is the receiver side: it learns seed c_i of instance i.
type baseReceiver struct {
	r      [baseCount]simot.Receiver
	choice [baseCount]int
	done   bool
}

// newBaseReceiver answers the sender's A message for the choice bits of
// choices (bit i of Lo, then Hi) and returns the B message.
func newBaseReceiver(msgA []byte, choices Block) (_ *baseReceiver, _ []byte, err error) {
	defer guard("base OT receiver", &err)
	As, err := decodePoints(msgA, baseCount, "base OT message A")
	if err != nil {
		return nil, nil, err
	}
	br := &baseReceiver{}
	msg := make([]byte, 0, baseMsgBLen)
	for i, A := range As {
		br.choice[i] = int(bitOf(choices, i))
		B := br.r[i].Round1Receiver(baseGroup, br.choice[i], i, A)
		enc, err := B.MarshalBinary()
		if err != nil {
			return nil, nil, fmt.Errorf("base OT receiver %d: encode B: %w", i, err)
		}
		if len(enc) != pointLen {
			return nil, nil, fmt.Errorf("base OT receiver %d: B encodes to %d bytes, want %d", i, len(enc), pointLen)
		}
		msg = append(msg, enc...)
	}
	return br, msg, nil
}

// finish opens the chosen ciphertext of every instance.
func (br *baseReceiver) finish(msgE []byte) (seeds [baseCount][seedLen]byte, err error) {
	defer guard("base OT receiver", &err)
	if br.done {
		return seeds, fmt.Errorf("base OT receiver: already finished")
	}
	if len(msgE) != baseMsgELen {
		return seeds, fmt.Errorf("base OT message E: %d bytes, want %d", len(msgE), baseMsgELen)
	}
	br.done = true
	for i := range br.r {
		off := i * 2 * sealedLen
		e0 := msgE[off : off+sealedLen]
		e1 := msgE[off+sealedLen : off+2*sealedLen]
		if err := br.r[i].Round3Receiver(e0, e1, br.choice[i]); err != nil {
			return seeds, fmt.Errorf("base OT %d: opening the chosen seed: %w", i, err)
		}
		m := br.r[i].Returnmc()
		if len(m) != seedLen {
			return seeds, fmt.Errorf("base OT %d: seed of %d bytes, want %d", i, len(m), seedLen)
		}
		copy(seeds[i][:], m)
	}
	return seeds, nil
}

// guard turns a panic inside circl (which panics on internal invariants such
// as a failed marshal or a consumed sender) into an error, so that no peer
// message can crash the process through it.
func guard(what string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%s: circl: %v", what, r)
	}
}

// bitOf returns bit i (0–127) of b.
func bitOf(b Block, i int) uint64 {
	if i < 64 {
		return b.Lo >> i & 1
	}
	return b.Hi >> (i - 64) & 1
}
