package selection

import (
	"encoding/binary"
	"sync"
	"testing"

	"github.com/selectformer/selectformer/beaver/ot"
)

// TestOTChecksAbortSelection: in a dealer-free selection whose data owner
// alters the first message of a kind it sends on a beaver stream, the
// model owner's check refuses it: its run ends with the case's error (a
// beaver.ErrCorrelationCheck), the data owner receives the public reason
// AbortCorrelation, the model owner handed out no item of that stream, and
// no party returns a result. The cases:
//
//   - SoftSpokenOT: the data owner, as OT extension receiver, flips the last
//     bit of the consistency check's t in its first extension message (as a
//     receiver that sent inconsistent corrections and guessed Δ wrong
//     would): ot.ErrExtensionCheck.
//   - silent OT: it names silent OTs the pool has not made in its first
//     range message (as a receiver trying to reuse or invent COTs would):
//     ot.ErrSilentRange. (The SoftSpokenOT check that guards the pools'
//     base COTs is tested in package ot: a bind fails with it.)
func TestOTChecksAbortSelection(t *testing.T) {
	for _, c := range []struct {
		name   string
		opts   ot.ProviderOptions
		match  func(s uint32, b []byte) bool
		change func(b []byte)
		want   error
	}{
		{
			name: "SoftSpokenOT",
			// A generator's first extension message (k = 4): 512 words of
			// trees, 64 words per 128 OTs (the call's and the check's 256),
			// x and t (4 words, t last).
			match: func(_ uint32, b []byte) bool {
				w := len(b) / 8
				return len(b)%8 == 0 && w >= 512+64*3+4 && (w-512-4)%64 == 0
			},
			change: func(b []byte) { b[len(b)-1] ^= 0x80 },
			want:   ot.ErrExtensionCheck,
		},
		{
			name: "silent OT",
			opts: ot.ProviderOptions{SilentOT: true},
			// A receiver's range message starts with the range's first
			// index: a multiple of 128 far below 2^40 (a uniform word never
			// is).
			match: func(s uint32, b []byte) bool {
				if s >= 1<<20 || len(b) < 16 || len(b)%8 != 0 {
					return false
				}
				w := binary.LittleEndian.Uint64(b)
				return w%128 == 0 && w < 1<<40
			},
			change: func(b []byte) { binary.LittleEndian.PutUint64(b, 1<<40) },
			want:   ot.ErrSilentRange,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			seen := map[uint32]bool{}
			relay := &heRelay{items: map[uint32]int{},
				pick: func(s uint32, b []byte) bool {
					mu.Lock()
					defer mu.Unlock()
					first := !seen[s]
					seen[s] = true
					return first && c.match(s, b)
				},
				change: c.change,
			}
			errs, res, prov0 := relayedSelection(t, relay, true, func() (ot.ProviderOptions, error) { return c.opts, nil })
			relay.checkAborted(t, errs, res, prov0, c.want)
		})
	}
}
