package bench

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/selection/purchase"
)

// The purchase's costs in a sample run (package selection/purchase): the
// data owner commits to its candidates before the coin toss and sends the
// bootstrap's openings beside its inputs.

// ItemBytes is the size of one of w's candidates as the data owner commits
// to and delivers it (the bytes mkpool writes): a ViT's image of 3
// channels at 16-pixel patches (224 × 224 × 3 for 197 tokens), a text of
// about 4 bytes a token.
func (w Workload) ItemBytes() int {
	if a, err := w.Arch(0); err == nil && a.Family == model.ViT {
		side := 16 * intSqrt(w.Seq-1)
		return 3 * side * side
	}
	return 4 * w.Seq
}

func intSqrt(n int) int {
	r := 0
	for (r+1)*(r+1) <= n {
		r++
	}
	return r
}

// synthItems are n synthetic candidates of size bytes each, made on demand
// from their index (no memory): a sample run's pool to commit to.
type synthItems struct{ n, size int }

func (s synthItems) Len() int { return s.n }

func (s synthItems) AppendItem(dst []byte, i int) ([]byte, error) {
	if i < 0 || i >= s.n {
		return dst, fmt.Errorf("bench: candidate %d of %d", i, s.n)
	}
	x := uint64(i)*0x9e3779b97f4a7c15 + 1
	for k := 0; k < s.size; k += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		dst = binary.LittleEndian.AppendUint64(dst, x)
	}
	return dst[:len(dst)-(8-s.size%8)%8], nil
}

// CommitmentCost is what the commitment to the pool added to a sample
// run's clear messages, measured, and projected to the workload's pool.
type CommitmentCost struct {
	// RootBytes is the root in the data owner's hello: 64 hex digits and
	// the JSON key.
	RootBytes int `json:"root_bytes"`
	// Openings is the bootstrap's size; ItemBytes a candidate's;
	// OpeningBytes the openings message the data owner sent (measured).
	Openings     int   `json:"openings"`
	ItemBytes    int   `json:"item_bytes"`
	OpeningBytes int64 `json:"opening_bytes"`
	// ProjectedOpeningBytes is the openings message of the full pool's
	// bootstrap: each opening 45 bytes, the item and ⌈log2 pool⌉ hashes.
	ProjectedOpeningBytes int64 `json:"projected_opening_bytes"`
}

// rootHelloBytes is the root's share of the hello: `,"pool_root":"` + 64
// hex digits + `"`.
const rootHelloBytes = len(`,"pool_root":""`) + 2*purchase.HashSize

// commitmentCost is the cost of a run of w on n candidates whose data
// owner sent openings of openingBytes for a bootstrap of boot.
func commitmentCost(w Workload, boot int, openingBytes int64) CommitmentCost {
	pool := w.Pool
	fullBoot := int(float64(pool)*w.Bootstrap + 0.5)
	per := int64(45 + w.ItemBytes() + purchase.HashSize*bits.Len(uint(pool-1)))
	return CommitmentCost{RootBytes: rootHelloBytes, Openings: boot, ItemBytes: w.ItemBytes(), OpeningBytes: openingBytes,
		ProjectedOpeningBytes: 4 + int64(fullBoot)*per}
}
