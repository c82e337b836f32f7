package selection

import (
	"errors"
	"sync"
	"testing"

	"github.com/selectformer/selectformer/beaver"
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
	relay.mu.Lock()
	defer relay.mu.Unlock()
	if !relay.tampered {
		t.Fatalf("no extension message was altered; errors %v", errs)
	}
	if !errors.Is(errs[0], ot.ErrExtensionCheck) || !errors.Is(errs[0], beaver.ErrCorrelationCheck) {
		t.Fatalf("model owner: %v, want ot.ErrExtensionCheck", errs[0])
	}
	var pe *PeerAbortError
	if !errors.As(errs[1], &pe) || pe.Party != 0 || pe.Code != AbortCorrelation {
		t.Fatalf("data owner: %v, want the model owner's abort AbortCorrelation", errs[1])
	}
	prov0.mu.Lock()
	defer prov0.mu.Unlock()
	if got := prov0.ok[relay.stream]; got != 0 || prov0.bad[relay.stream] == 0 {
		t.Fatalf("stream %d: the model owner handed out %d items and refused %d; want none and a refusal", relay.stream, got, prov0.bad[relay.stream])
	}
	if res[0] != nil || res[1] != nil {
		t.Fatal("a party returned a result")
	}
	t.Logf("altered the first extension message of stream %d; model owner: %v; data owner: %v", relay.stream, errs[0], errs[1])
}
