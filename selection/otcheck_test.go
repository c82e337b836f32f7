package selection

import (
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
