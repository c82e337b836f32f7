package protocol

import (
	"fmt"
	"slices"

	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// This file exports the costs of the package doc's table that callers build
// their own cost formulas on (proxy/secure's BlockCost, HeadCost), so that
// the framing and the sign circuit's message sizes have one home. The tests
// check each function against the measured traffic of its protocol.

// Cost is what one protocol call costs one party online: the rounds (each a
// dependent exchange) and the bytes it sends on the wire.
type Cost struct {
	Rounds int64
	Bytes  int64
}

// Plus returns the cost of c followed by d.
func (c Cost) Plus(d Cost) Cost { return Cost{Rounds: c.Rounds + d.Rounds, Bytes: c.Bytes + d.Bytes} }

// MessageBytes returns the bytes one message of words ring words costs on
// the wire, msg(words) in the package doc: 8·words + 10 while that is one
// frame (8·words ≤ 1 MiB), then an 8-byte total length and a 10-byte header
// per frame (transport.MessageBytes, the transport's default options).
func MessageBytes(words int) int64 { return transport.MessageBytes(8 * words) }

// signWords64 and signWords32 are the words each party sends at each
// exchange of the sign circuit on 64 and 32 bits, per word (64 elements) of
// input: the leaves' cross ANDs (1 + 5·(leaves − 1)), then two words per
// AND of each level of the carry tree (see "The sign circuit" in binary.go),
// {156, 62, 30, 14, 6, 2} and {76, 30, 14, 6, 2}. Both are read off the
// layout the circuit itself sizes its messages from (signCircuit).
var (
	signWords64 = signCircuit(64).words()
	signWords32 = signCircuit(32).words()
)

// SignCircuitWords returns the words each party sends at each exchange of
// the sign circuit (MSB, and the comparisons and ReLUs built on it) on width
// bits, per word of input (64 elements, packed): {156, 62, 30, 14, 6, 2} for
// width 64, {76, 30, 14, 6, 2} for 32 (CompareRevealBounded), and the
// layout of signCircuit(width) for any other even width of 2..64
// (TruncReLURing: {131, 50, 26, 10, 6, 2} at 54). Each exchange is one
// round. It panics for another width.
func SignCircuitWords(width int) []int {
	return slices.Clone(signWords(width))
}

// signWords is SignCircuitWords without the copy.
func signWords(width int) []int {
	switch width {
	case 64:
		return signWords64
	case 32:
		return signWords32
	}
	if signWidthOK(width) {
		return signCircuit(width).words()
	}
	panic(fmt.Sprintf("protocol: sign circuit on %d bits: need an even width of 2..64", width))
}

// MSBCost returns the cost of MSB (and of LessThanBits) on n elements for
// each party: 6 rounds and Σ msg(k·W), k ∈ SignCircuitWords(64),
// W = ⌈n/64⌉; nothing for n ≤ 0.
func MSBCost(n int) Cost {
	return signCost(n, 64, 0)
}

// signCost is the cost of the sign circuit on width bits for n elements
// whose first message also carries rider words.
func signCost(n, width, rider int) Cost {
	if n <= 0 {
		return Cost{}
	}
	w := share.PackedWords(n)
	var c Cost
	for i, k := range signWords(width) {
		words := k * w
		if i == 0 {
			words += rider
		}
		c = c.Plus(Cost{Rounds: 1, Bytes: MessageBytes(words)})
	}
	return c
}

// TruncReLUCost returns the cost of TruncReLU on n elements for each party:
// 7 rounds, the sign circuit's 6 (its first message also carrying the
// truncation's W words of bits: msg(157·W)) and the multiplexer's
// msg(W + n), W = ⌈n/64⌉; nothing for n ≤ 0.
func TruncReLUCost(n int) Cost {
	if n <= 0 {
		return Cost{}
	}
	return signCost(n, 64, share.PackedWords(n)).Plus(Cost{Rounds: 1, Bytes: MessageBytes(share.PackedWords(n) + n)})
}

// MulPrivateRowBitsCost returns the cost of MulPrivateRowBits on rows rows
// of width words for party 0 and party 1: 1 round each; party 0 sends
// msg(rows·width), party 1 msg(⌈rows/64⌉).
func MulPrivateRowBitsCost(rows, width int) [2]Cost {
	return [2]Cost{
		{Rounds: 1, Bytes: MessageBytes(rows * width)},
		{Rounds: 1, Bytes: MessageBytes(share.PackedWords(rows))},
	}
}
