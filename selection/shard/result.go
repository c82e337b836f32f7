package shard

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/selectformer/selectformer/selection"
)

// Result is what a worker returns to its coordinator: its party's
// shares of the entropies of every batch of its shard, each with the
// phase's batch number and the worker pair's epoch that computed it
// (both workers of a pair return the same numbers and epochs), and its
// figures for the job.
type Result struct {
	// Batches are the shard's batches, ascending.
	Batches []selection.BatchShares
	// Stats are the worker's figures for the job (its Shard and Batches
	// are the job's: the coordinator sets them). A job's runner that
	// counts nothing leaves them zero.
	Stats selection.ShardStats
}

// resultMagic starts an encoded Result.
const resultMagic = "SFR2"

// resultStatsLen is the size of a result's figures.
const resultStatsLen = 4 + 4 + 8 + 8 + 8 + 8 + 8

// encodeResult encodes r: "SFR2" | batch count u32 | per batch: batch u32 |
// epoch u64 | n u32 | n × u64 shares | the figures: attempts u32 | resumed
// u32 | forward rounds u64 | bytes sent u64 | bytes received u64 | dealer
// bytes u64 | wall time in nanoseconds u64, little-endian. Figures outside
// their bounds are encoded as they are (and refused by decodeResult).
func encodeResult(r *Result) []byte {
	n := len(resultMagic) + 4 + resultStatsLen
	for _, bs := range r.Batches {
		n += 16 + 8*len(bs.Shares)
	}
	b := make([]byte, 0, n)
	b = append(b, resultMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Batches)))
	for _, bs := range r.Batches {
		b = binary.LittleEndian.AppendUint32(b, uint32(bs.Batch))
		b = binary.LittleEndian.AppendUint64(b, bs.Epoch)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(bs.Shares)))
		for _, s := range bs.Shares {
			b = binary.LittleEndian.AppendUint64(b, s)
		}
	}
	st := r.Stats
	b = binary.LittleEndian.AppendUint32(b, uint32(min(max(st.Attempts, 0), math.MaxUint32)))
	b = binary.LittleEndian.AppendUint32(b, uint32(min(max(st.Resumed, 0), math.MaxUint32)))
	for _, v := range []int64{st.ForwardRounds, st.BytesSent, st.BytesRecv, st.RandomnessBytes} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	ns := st.Seconds * 1e9
	if !(ns >= 0 && ns < math.MaxInt64) { // NaN and out of range: refused when decoded
		ns = math.MaxInt64
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(int64(ns)))
	return b
}

// resultBound is the size of the result of job j (bytes).
func resultBound(j *Job) int {
	_, _, blo, bhi := j.span()
	return len(resultMagic) + 4 + 16*(bhi-blo) + 8*len(j.Candidates) + resultStatsLen
}

// decodeResult decodes a worker's result for job j and checks it: the size
// first (resultBound), then exactly the shard's batches, ascending, each
// of the batch's size, of an epoch in 1..MaxEpoch−1, and figures within
// their bounds (selection.ShardStats.Check; 0 attempts: a runner that
// counts nothing). The figures' Shard and Batches are the job's.
func decodeResult(b []byte, j *Job) (*Result, error) {
	bad := func(format string, args ...any) (*Result, error) {
		return nil, selection.WithAbortCode(selection.AbortProtocol, fmt.Errorf("shard: shard %d result: "+format, append([]any{j.Shard + 1}, args...)...))
	}
	if len(b) != resultBound(j) {
		return bad("%d bytes (want %d)", len(b), resultBound(j))
	}
	if string(b[:len(resultMagic)]) != resultMagic {
		return bad("not a result")
	}
	lo, _, blo, bhi := j.span()
	bs := j.Params.PhaseBatchSize(j.Phase)
	if n := binary.LittleEndian.Uint32(b[len(resultMagic):]); uint64(n) != uint64(bhi-blo) {
		return bad("%d batches (want %d)", n, bhi-blo)
	}
	b = b[len(resultMagic)+4:]
	out := &Result{Batches: make([]selection.BatchShares, 0, bhi-blo)}
	for g := blo; g < bhi; g++ {
		if len(b) < 16 {
			return bad("truncated")
		}
		nb, ep, n := int(binary.LittleEndian.Uint32(b)), binary.LittleEndian.Uint64(b[4:]), uint64(binary.LittleEndian.Uint32(b[12:]))
		want := min((g+1)*bs, lo+len(j.Candidates)) - g*bs
		if nb != g || n != uint64(want) || ep == 0 || ep >= selection.MaxEpoch {
			return bad("batch %d of %d shares, epoch %d (want batch %d of %d)", nb, n, ep, g, want)
		}
		b = b[16:]
		if uint64(len(b)) < 8*n {
			return bad("truncated")
		}
		sh := make([]uint64, n)
		for i := range sh {
			sh[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
		b = b[8*n:]
		out.Batches = append(out.Batches, selection.BatchShares{Batch: g, Epoch: ep, Shares: sh})
	}
	if len(b) != resultStatsLen {
		return bad("truncated")
	}
	att, res := uint64(binary.LittleEndian.Uint32(b)), uint64(binary.LittleEndian.Uint32(b[4:]))
	var v [5]uint64
	for i := range v {
		v[i] = binary.LittleEndian.Uint64(b[8+8*i:])
	}
	out.Stats = selection.ShardStats{Shard: j.Shard, Batches: bhi - blo, Resumed: int(res), Attempts: int(att), ForwardRounds: int64(v[0]),
		BytesSent: int64(v[1]), BytesRecv: int64(v[2]), RandomnessBytes: int64(v[3]), Seconds: float64(v[4]) / 1e9}
	if err := out.Stats.Check(); err != nil {
		return bad("%w", err)
	}
	return out, nil
}
