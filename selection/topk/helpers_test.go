package topk

import (
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/sessiontest"
)

// The helpers shared with selection's tests (testharness/sessiontest).
var (
	sessionPairFP      = sessiontest.PairFP
	shareFromDataOwner = sessiontest.ShareFromDataOwner
	plainTopK          = sessiontest.PlainTopK
)

// quantize rounds v to the nearest value that fp encodes.
func quantize(fp share.FixedPoint, v float64) float64 {
	w, _ := fp.Encode(v)
	return fp.Decode(w)
}
