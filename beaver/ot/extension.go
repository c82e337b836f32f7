package ot

import "context"

// Where a generator's OTs come from: the session's silent-OT pools
// (ferret_pool.go) when the session has them (a provider's), else the
// generator's own SoftSpokenOT extension (softspoken.go). Both give rows
// t_j = q_j ⊕ c_j·Δ under the session's Δ and an index j0 for the hash
// tweaks of the call's first OT; the engine (cot.go) and the random-OT
// calls do not depend on which.

// extGroupWords returns the words a group of 64 OTs counts for in the
// engine's chunk sizing: SoftSpokenOT's matrix words whichever the source,
// so that a chunk's rows (16 bytes an OT, in scratch memory, on each of the
// generators running at once) stay about 32 MB at most. Sized by the pools'
// one bit an OT instead, a chunk of one-bit products would hold 64 M OTs,
// 1 GB of rows.
func (g *Gen) extGroupWords() int { return g.rcv.shape.matrixWords(64) }

// extRecvWords returns the words this party sends as receiver of n OTs (n
// a multiple of 128) with chosen (or, when random, the source's own)
// choices.
func (g *Gen) extRecvWords(n int, chosen bool) int {
	if g.pool != nil {
		return poolMsgWords(n, chosen)
	}
	return g.rcv.words(n)
}

// extSendWords returns the words this party receives as sender of n OTs.
func (g *Gen) extSendWords(n int, chosen bool) int {
	if g.pool != nil {
		return poolMsgWords(n, chosen)
	}
	return g.snd.words(n)
}

// extendRecv makes n OTs (a multiple of 128) as receiver with the chosen
// bits choices (n/64 words): the message to send appended to dst, the rows
// (scratch memory: putBlocks) and the tweak index of the first OT.
func (g *Gen) extendRecv(ctx context.Context, dst, choices []uint64, n int) (msg []uint64, t []Block, j0 uint64, err error) {
	if g.pool != nil {
		return g.pool.recvChosen(ctx, dst, choices, n)
	}
	msg, t, j0 = g.rcv.extendTo(dst, choices, n)
	return msg, t, j0, nil
}

// extendRecvRandom is extendRecv with random choices, returned packed.
func (g *Gen) extendRecvRandom(ctx context.Context, dst []uint64, n int) (msg, choices []uint64, t []Block, j0 uint64, err error) {
	if g.pool != nil {
		return g.pool.recvRandom(ctx, dst, n)
	}
	choices = g.draw(n / 64)
	msg, t, j0 = g.rcv.extendTo(dst, choices, n)
	return msg, choices, t, j0, nil
}

// extendSend makes n OTs as sender from the receiver's message msg
// (extSendWords(n, chosen) words): the rows q (scratch memory) and the
// tweak index of the first OT.
func (g *Gen) extendSend(ctx context.Context, msg []uint64, n int, chosen bool) (q []Block, j0 uint64, err error) {
	if g.pool != nil {
		return g.pool.sendTake(ctx, msg, n, chosen)
	}
	return g.snd.extend(msg, n)
}
