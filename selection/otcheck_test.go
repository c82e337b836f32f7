package selection

import (
	"encoding/binary"
	"sync"
	"testing"

	"github.com/selectformer/selectformer/beaver/ot"
)

// TestOTExtensionCheckAbortsSelection: in a -provider ot selection whose
// data owner, as OT extension receiver, alters the first extension message
// it sends on a beaver stream (the last bit of the consistency check's t,
// as a receiver that sent inconsistent corrections and guessed Δ wrong
// would), the model owner's extension check fails: its run ends with
// ot.ErrExtensionCheck (a beaver.ErrCorrelationCheck), the data owner
// receives the public reason AbortCorrelation, the model owner handed out
// no item of that stream, and no party returns a result.
func TestOTExtensionCheckAbortsSelection(t *testing.T) {
	// A generator's first extension message (SoftSpokenOT, k = 4): 512
	// words of trees, 64 words per 128 OTs (the call's and the check's
	// 256), x and t (4 words, t last).
	isFirstExtension := func(b []byte) bool {
		w := len(b) / 8
		return len(b)%8 == 0 && w >= 512+64*3+4 && (w-512-4)%64 == 0
	}
	var mu sync.Mutex
	seen := map[uint32]bool{}
	relay := &heRelay{items: map[uint32]int{},
		pick: func(s uint32, b []byte) bool {
			mu.Lock()
			defer mu.Unlock()
			first := !seen[s]
			seen[s] = true
			return first && isFirstExtension(b)
		},
		change: func(b []byte) { b[len(b)-1] ^= 0x80 },
	}
	errs, res, prov0 := relayedSelection(t, relay, true, func() (ot.ProviderOptions, error) { return ot.ProviderOptions{}, nil })
	relay.checkAborted(t, errs, res, prov0, ot.ErrExtensionCheck)
}

// TestSilentRangeAbortsSelection: in a selection with silent OTs whose
// data owner, as OT receiver, names silent OTs the pool has not made in
// the first range message it sends on a beaver stream (as a receiver
// trying to reuse or invent COTs would), the model owner's generator
// refuses the range: its run ends with ot.ErrSilentRange (a
// beaver.ErrCorrelationCheck), the data owner receives the public reason
// AbortCorrelation, the model owner handed out no item of that stream, and
// no party returns a result. (The SoftSpokenOT check that guards the
// pools' base COTs is tested in package ot: a bind fails with it.)
func TestSilentRangeAbortsSelection(t *testing.T) {
	// A receiver's range message starts with the range's first index: a
	// multiple of 128 far below 2^40 (a uniform word never is).
	isRange := func(s uint32, b []byte) bool {
		if s >= 1<<20 || len(b) < 16 || len(b)%8 != 0 {
			return false
		}
		w := binary.LittleEndian.Uint64(b)
		return w%128 == 0 && w < 1<<40
	}
	var mu sync.Mutex
	seen := map[uint32]bool{}
	relay := &heRelay{items: map[uint32]int{},
		pick: func(s uint32, b []byte) bool {
			mu.Lock()
			defer mu.Unlock()
			first := !seen[s]
			seen[s] = true
			return first && isRange(s, b)
		},
		change: func(b []byte) { binary.LittleEndian.PutUint64(b, 1<<40) },
	}
	errs, res, prov0 := relayedSelection(t, relay, true, func() (ot.ProviderOptions, error) { return ot.ProviderOptions{SilentOT: true}, nil })
	relay.checkAborted(t, errs, res, prov0, ot.ErrSilentRange)
}
