package shard

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/share"
)

func TestSpan(t *testing.T) {
	cases := []struct {
		n, bs, K int
		want     [][2]int
	}{
		{230, 16, 1, [][2]int{{0, 230}}},
		{230, 16, 2, [][2]int{{0, 112}, {112, 230}}}, // 15 batches: 7 and 8
		{230, 16, 3, [][2]int{{0, 80}, {80, 160}, {160, 230}}},
		{20, 16, 3, [][2]int{{0, 0}, {0, 16}, {16, 20}}}, // 2 batches for 3 shards: one empty
		{64, 64, 2, [][2]int{{0, 0}, {0, 64}}},
		{0, 16, 2, [][2]int{{0, 0}, {0, 0}}},
	}
	for _, c := range cases {
		var got [][2]int
		next := 0
		for k := range c.K {
			lo, hi := Span(c.n, c.bs, c.K, k)
			if lo != next || lo%c.bs != 0 || hi < lo {
				t.Errorf("Span(%d, %d, %d, %d) = [%d, %d): not contiguous at a batch boundary", c.n, c.bs, c.K, k, lo, hi)
			}
			next = hi
			got = append(got, [2]int{lo, hi})
		}
		if next != c.n || !slices.Equal(got, c.want) {
			t.Errorf("n %d, batch %d, K %d: %v, want %v", c.n, c.bs, c.K, got, c.want)
		}
	}
	for _, bad := range [][4]int{{-1, 16, 2, 0}, {10, 0, 2, 0}, {10, 16, 0, 0}, {10, 16, 2, 2}, {10, 16, 2, -1}, {10, 16, MaxShards + 1, 0}} {
		if lo, hi := Span(bad[0], bad[1], bad[2], bad[3]); lo != 0 || hi != 0 {
			t.Errorf("Span%v = [%d, %d), want empty", bad, lo, hi)
		}
	}
}

// testJob is a valid job: shard 1 of 2 of phase 1 of testParams' 230
// candidates.
func testJob() *Job {
	p := testParams().WithDefaults()
	cand := candidates(p.PoolSize, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	lo, hi := Span(len(cand), p.BatchSize, 2, 1)
	return &Job{Version: selection.ProtocolVersion, Party: 1, Params: p, Session: jobSession(share.Seed{1}, 0, 1, 2), Phase: 0, Shard: 1,
		Shards: 2, PhaseCandidates: len(cand), FirstBatch: lo / p.BatchSize, Candidates: cand[lo:hi], EmbeddingHash: "emb"}
}

func TestJobRoundTripAndRefusals(t *testing.T) {
	j := testJob()
	b, err := EncodeJob(j)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeJob(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Session != j.Session || !slices.Equal(got.Candidates, j.Candidates) || got.FirstBatch != 7 || got.Shard != 1 {
		t.Fatalf("round trip: %+v", got)
	}
	mo := testJob()
	mo.Party, mo.Proxy = 0, []byte("proxy bytes")
	b, err = EncodeJob(mo)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeJob(b); err != nil || string(got.Proxy) != "proxy bytes" {
		t.Fatalf("model owner's job: %v", err)
	}
	cases := []struct {
		name string
		mod  func(j *Job)
		raw  func(b []byte) []byte
	}{
		{"shard ≥ K", func(j *Job) { j.Shard = 2 }, nil},
		{"K over MaxShards", func(j *Job) { j.Shards = MaxShards + 1 }, nil},
		{"wrong candidates", func(j *Job) { j.Candidates = append(slices.Clone(j.Candidates[1:]), 500) }, nil},
		{"unsorted candidates", func(j *Job) {
			j.Candidates = slices.Clone(j.Candidates)
			j.Candidates[0], j.Candidates[1] = j.Candidates[1], j.Candidates[0]
		}, nil},
		{"candidates of another shard", func(j *Job) { j.Shard = 0 }, nil},
		{"first batch", func(j *Job) { j.FirstBatch = 6 }, nil},
		{"phase", func(j *Job) { j.Phase = 2 }, nil},
		{"version", func(j *Job) { j.Version = 99 }, nil},
		{"data owner's job with a proxy", func(j *Job) { j.Proxy = []byte{1} }, nil},
		{"bad params", func(j *Job) { j.Params.Budget = 0 }, nil},
		{"oversized header", nil, func(b []byte) []byte { b[4], b[5], b[6], b[7] = 0xff, 0xff, 0xff, 0x7f; return b }},
		{"candidate count beyond the message", nil, func(b []byte) []byte {
			hl := int(b[4]) | int(b[5])<<8 | int(b[6])<<16
			off := 8 + hl + 32
			b[off], b[off+1], b[off+2], b[off+3] = 0xff, 0xff, 0xff, 0xff
			return b
		}},
		{"unknown field", nil, func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"version"`, `"versioN2"`, 1))
		}},
		{"truncated", nil, func(b []byte) []byte { return b[:len(b)-3] }},
	}
	for _, c := range cases {
		j := testJob()
		if c.mod != nil {
			c.mod(j)
		}
		b, err := EncodeJob(j)
		if err != nil {
			t.Fatal(err)
		}
		if c.raw != nil {
			b = c.raw(b)
		}
		if _, err := DecodeJob(b); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

// TestJobPhaseBatchSize: a job's batches are its phase's size
// (selection.Params.PhaseBatchSize), not the run's: shard 2 of 3 of phase
// 1's 230 candidates in batches of 8 (29 batches: [9, 19), candidates
// [72, 152)) is accepted and bounds its result by them; the same shard
// cut in the run's batches of 16 ([80, 160), first batch 5) is refused.
func TestJobPhaseBatchSize(t *testing.T) {
	p := testParams().WithDefaults()
	p.Schedule = slices.Clone(p.Schedule)
	p.Schedule[0].BatchSize = 8
	cand := candidates(p.PoolSize, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	job := func(bs int) *Job {
		lo, hi := Span(len(cand), bs, 3, 1)
		return &Job{Version: selection.ProtocolVersion, Party: 1, Params: p, Session: jobSession(share.Seed{1}, 0, 1, 3), Phase: 0, Shard: 1,
			Shards: 3, PhaseCandidates: len(cand), FirstBatch: lo / bs, Candidates: cand[lo:hi], EmbeddingHash: "emb"}
	}
	b, err := EncodeJob(job(8))
	if err != nil {
		t.Fatal(err)
	}
	j, err := DecodeJob(b)
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi, blo, bhi := j.span(); lo != 72 || hi != 152 || blo != 9 || bhi != 19 || j.FirstBatch != 9 || len(j.Candidates) != 80 {
		t.Errorf("span [%d, %d), batches [%d, %d), first batch %d", lo, hi, blo, bhi, j.FirstBatch)
	}
	if want := len(resultMagic) + 4 + 16*10 + 8*80 + resultStatsLen; resultBound(j) != want {
		t.Errorf("result bound %d, want %d (10 batches)", resultBound(j), want)
	}
	if b, err = EncodeJob(job(16)); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeJob(b); err == nil {
		t.Error("a job cut in the run's batch size, not its phase's, was accepted")
	}
}

func TestResultChecked(t *testing.T) {
	j := testJob()
	p := j.Params
	var r Result
	for b := j.FirstBatch; b < 15; b++ {
		lo, hi := b*p.BatchSize, min((b+1)*p.BatchSize, j.PhaseCandidates)
		r.Batches = append(r.Batches, selection.BatchShares{Batch: b, Epoch: 1, Shares: make([]uint64, hi-lo)})
	}
	if _, err := decodeResult(encodeResult(&r), j); err != nil {
		t.Fatal(err)
	}
	bad := []func(r *Result){
		func(r *Result) { r.Batches = r.Batches[1:] },
		func(r *Result) { r.Batches[0].Batch = 0 },
		func(r *Result) { r.Batches[0].Epoch = 0 },
		func(r *Result) { r.Batches[1].Shares = r.Batches[1].Shares[1:] },
		func(r *Result) { r.Batches[0], r.Batches[1] = r.Batches[1], r.Batches[0] },
	}
	for i, f := range bad {
		c := Result{Batches: slices.Clone(r.Batches)}
		f(&c)
		if _, err := decodeResult(encodeResult(&c), j); err == nil {
			t.Errorf("case %d: accepted", i)
		}
	}
}

func FuzzDecodeJob(f *testing.F) {
	// Small seeds: a header with a few fields and some candidates (the
	// fuzzing engine stalls on the whole 1.2 KB job as a seed; the whole
	// job's refusals are TestJobRoundTripAndRefusals').
	for _, h := range []string{`{"version":2,"party":1,"shard":1,"shards":2,"phase_candidates":20,"first_batch":1}`,
		`{"version":2,"party":0,"params":{"pool_size":30,"budget":20,"bootstrap":4,"schedule":[{"keep":1}],"batch_size":16},"shards":1,"phase_candidates":26}`,
		`{"version":2,"party":0,"params":{"pool_size":30,"budget":20,"bootstrap":4,"schedule":[{"keep":1}],"batch_size":16},"shards":1,"phase_candidates":26,"floor":16777214}`} {
		b := append([]byte("SFJ1"), binary.LittleEndian.AppendUint32(nil, uint32(len(h)))...)
		b = append(append(b, h...), make([]byte, 32)...)
		b = binary.LittleEndian.AppendUint32(b, 3)
		for _, c := range []uint32{4, 7, 9} {
			b = binary.LittleEndian.AppendUint32(b, c)
		}
		f.Add(b)
	}
	f.Add([]byte("SFJ1\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := DecodeJob(b)
		if err != nil {
			return
		}
		lo, hi := Span(j.PhaseCandidates, j.Params.WithDefaults().BatchSize, j.Shards, j.Shard)
		if len(j.Candidates) != hi-lo || j.Shard >= j.Shards || j.Shards > MaxShards || j.Floor > selection.MaxEpoch-2 {
			t.Fatalf("accepted an inconsistent job: %+v", j)
		}
	})
}

func TestComparePairHello(t *testing.T) {
	sessionHash := func(id beaver.SessionID) string { return hex.EncodeToString(id[:]) }
	j := testJob()
	base := pairHello{Version: selection.ProtocolVersion, Party: 0, Session: sessionHash(j.Session), Phase: 0, Shard: 1, Shards: 2,
		Candidates: j.candidatesHash(), Arch: j.archHash(), ViewHash: "v", Epoch: 1}
	peer := base
	peer.Party = 1
	if err := comparePairHello(base, peer); err != nil {
		t.Fatal(err)
	}
	lying := testJob()
	lying.Candidates = append([]int{lying.Candidates[0] - 1}, lying.Candidates[1:]...)
	cases := []struct {
		field string
		mod   func(h *pairHello)
	}{
		{"version", func(h *pairHello) { h.Version++ }},
		{"party", func(h *pairHello) { h.Party = 0 }},
		{"shard_session", func(h *pairHello) { h.Session = sessionHash(jobSession(share.Seed{2}, 0, 1, 2)) }},
		{"phase", func(h *pairHello) { h.Phase = 1 }},
		{"shard", func(h *pairHello) { h.Shard = 0 }},
		{"shards", func(h *pairHello) { h.Shards = 3 }},
		{"candidates", func(h *pairHello) { h.Candidates = lying.candidatesHash() }},
		{"arch", func(h *pairHello) { h.Arch = "x" }},
		{"view_hash", func(h *pairHello) { h.ViewHash = "w" }},
	}
	for _, c := range cases {
		h := peer
		c.mod(&h)
		var me *selection.MismatchError
		if err := comparePairHello(base, h); !errors.As(err, &me) || me.Field != c.field || !slices.Contains(selection.MismatchFields, me.Field) {
			t.Errorf("%s: %v", c.field, err)
		}
	}
}

func TestPairRetryable(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("transport: connection closed by peer: EOF"), true},
		{context.Canceled, true},
		{selection.WithAbortCode(selection.AbortProtocol, fmt.Errorf("a message cut short")), true},
		{&selection.PeerAbortError{Code: selection.AbortCancelled}, true},
		{&selection.PeerAbortError{Code: selection.AbortMismatch, Field: "candidates"}, false},
		{&selection.PeerAbortError{Code: selection.AbortInput}, false},
		{&selection.MismatchError{Field: "candidates"}, false},
		{&selection.EpochError{Local: 1, Peer: 5000}, false},
		{&selection.StateError{Path: "x", Err: fmt.Errorf("bad")}, false},
		{selection.WithAbortCode(selection.AbortInput, fmt.Errorf("no proxy")), false},
	}
	for _, c := range cases {
		if got := retryable(c.err); got != c.want {
			t.Errorf("retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
