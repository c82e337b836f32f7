package shard

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// The bounds of a worker's figures: selection.ShardStats.Bounded's
// saturation.
var (
	maxFigures       = selection.ShardStats{Attempts: math.MaxInt, ForwardRounds: math.MaxInt64, BytesSent: math.MaxInt64}.Bounded()
	maxShardAttempts = maxFigures.Attempts
	maxShardRounds   = maxFigures.ForwardRounds
	maxShardBytes    = maxFigures.BytesSent
)

// unshardedRefConn is unshardedRef, with each party's figures of its whole
// connection (every stream) at the end of the run.
func unshardedRefConn(t *testing.T, p selection.Params) ([2]*selection.Result, [2]transport.Stats) {
	t.Helper()
	return unshardedRefStats(t, p, (*transport.Conn).Stats)
}

// pairOnline is a pair connection's online traffic as a run counts it:
// its clear control stream, its control session and its batch lanes.
func pairOnline(c *transport.Conn, workers int) transport.Stats {
	st := c.Stream(selection.StreamControl).Stats().Add(c.Stream(selection.StreamSession).Stats())
	for w := range workers {
		st = st.Add(c.Stream(selection.StreamSlotBase + uint32(w)).Stats())
	}
	return st
}

// TestShardedPhaseStats: a sharded run's selection.PhaseStats count the worker
// pairs' traffic, not only the coordinators'. For each party and phase,
// each worker's report (selection.ShardStats) is its job's, and the workers' bytes
// add up exactly to the bytes measured on that phase's pair connections;
// the phase's ForwardRounds are the largest pair's, its RandomnessBytes at
// least the workers' (their networked dealer's traffic: the data owner's
// words; the model owner's worker expands its seed). Over the run, the
// phases' bytes are exactly the pairs' plus the coordinators' phase
// traffic, which is their link's whole traffic less what an unsharded run
// from the same coin sends outside its phases (the handshake, coin,
// bootstrap and appraisal; the sharded hello longer by K). Dealer-free
// (ot.Provider on every link), each worker's RandomnessBytes are its OT
// traffic, and its bytes still exactly its pair link's online streams.
func TestShardedPhaseStats(t *testing.T) {
	p := testParams()
	ref, refConn := unshardedRefConn(t, p)
	t.Run("dealer", func(t *testing.T) {
		srv, err := dealer.NewServerWithSeeds(share.Seed{9}, share.Seed{10}, dealer.ServerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r := newShardRig(t, 2, false)
		r.server = srv // the pairs' dealer over links of their own: counted
		got, errs, werrs := r.run()
		checkSame(t, ref, got, errs, werrs)
		checkShardedStats(t, r, ref, got, &refConn)
	})
	t.Run("dealer-free", func(t *testing.T) {
		r := newShardRig(t, 2, true)
		got, errs, werrs := r.run()
		checkSame(t, ref, got, errs, werrs)
		checkShardedStats(t, r, ref, got, nil)
	})
}

// checkShardedStats checks a sharded run's phase figures against its pair
// connections and, given the unsharded run's connection totals refConn
// (a run with no provider traffic on the coordinators' link), the
// coordinators' phase traffic.
func checkShardedStats(t *testing.T, r *shardRig, ref, got [2]*selection.Result, refConn *[2]transport.Stats) {
	t.Helper()
	workers := r.p.WithDefaults().Workers
	shardsField := int64(len(`,"shards":2`))
	for q := range 2 {
		var pairs, phases, refPhases transport.Stats
		for i, ps := range got[q].Phases {
			var measured transport.Stats
			for n, c := range r.pairConns[q] {
				if r.pairPhases[q][n] == i {
					measured = measured.Add(pairOnline(c, workers))
				}
			}
			if len(ps.Shards) != 2 {
				t.Fatalf("party %d phase %d: %d shard figures, want 2", q, i+1, len(ps.Shards))
			}
			var sent, recv, dealer, rounds int64
			for k, s := range ps.Shards {
				lo, hi := Span(ps.In, r.p.BatchSize, 2, k)
				nb := (hi - lo + r.p.BatchSize - 1) / r.p.BatchSize
				if s.Shard != k || s.Batches != nb || s.Resumed != 0 || s.Attempts != 1 || s.ForwardRounds <= 0 ||
					s.BytesSent <= 0 || s.BytesRecv <= 0 || s.RandomnessBytes < 0 || (q == 1 || r.free) && s.RandomnessBytes == 0 || s.Seconds <= 0 {
					t.Errorf("party %d phase %d: shard figures %+v (want shard %d of %d batches, 1 attempt, traffic, rounds, time)", q, i+1, s, k, nb)
				}
				sent, recv, dealer, rounds = sent+s.BytesSent, recv+s.BytesRecv, dealer+s.RandomnessBytes, max(rounds, s.ForwardRounds)
			}
			if sent != measured.BytesSent || recv != measured.BytesRecv {
				t.Errorf("party %d phase %d: workers report %d bytes sent, %d received; their pair links carried %d, %d", q, i+1, sent, recv, measured.BytesSent, measured.BytesRecv)
			}
			if ps.ForwardRounds != rounds || ps.SelectRounds <= 0 {
				t.Errorf("party %d phase %d: forward rounds %d (the largest pair's %d), select rounds %d", q, i+1, ps.ForwardRounds, rounds, ps.SelectRounds)
			}
			if ps.RandomnessBytes < dealer || ps.BytesSent <= sent || ps.BytesRecv <= recv {
				t.Errorf("party %d phase %d: %+v; want more than the pairs' %d bytes sent and %d received (QuickSelect's added), at least their %d dealer bytes", q, i+1, ps, sent, recv, dealer)
			}
			pairs = pairs.Add(measured)
			phases = phases.Add(transport.Stats{BytesSent: ps.BytesSent, BytesRecv: ps.BytesRecv})
			rp := ref[q].Phases[i]
			refPhases = refPhases.Add(transport.Stats{BytesSent: rp.BytesSent, BytesRecv: rp.BytesRecv})
		}
		if refConn == nil {
			continue
		}
		// The coordinators' phase traffic: their link's whole traffic less
		// what lies outside the phases (the unsharded run's, hellos longer
		// by K).
		c := r.coord[q].Stats()
		coordSent := c.BytesSent - shardsField - (refConn[q].BytesSent - refPhases.BytesSent)
		coordRecv := c.BytesRecv - shardsField - (refConn[q].BytesRecv - refPhases.BytesRecv)
		if phases.BytesSent != coordSent+pairs.BytesSent || phases.BytesRecv != coordRecv+pairs.BytesRecv {
			t.Errorf("party %d: the phases count %d bytes sent, %d received; want the coordinators' %d, %d plus the pairs' %d, %d",
				q, phases.BytesSent, phases.BytesRecv, coordSent, coordRecv, pairs.BytesSent, pairs.BytesRecv)
		}
		if phases.BytesSent < refPhases.BytesSent {
			t.Errorf("party %d: the sharded phases count %d bytes sent, fewer than one pair's %d", q, phases.BytesSent, refPhases.BytesSent)
		}
		t.Logf("party %d: phases %d B sent (coordinators %d, pairs %d), unsharded %d", q, phases.BytesSent, coordSent, pairs.BytesSent, refPhases.BytesSent)
	}
}

// TestResultStats: a worker's figures travel with its shares
// (encodeResult, decodeResult) and are bounded when decoded: each out of
// bounds is refused.
func TestResultStats(t *testing.T) {
	j := testJob()
	p := j.Params
	var r Result
	for b := j.FirstBatch; b < 15; b++ {
		lo, hi := b*p.BatchSize, min((b+1)*p.BatchSize, j.PhaseCandidates)
		r.Batches = append(r.Batches, selection.BatchShares{Batch: b, Epoch: 1, Shares: make([]uint64, hi-lo)})
	}
	r.Stats = selection.ShardStats{Resumed: 3, Attempts: 2, ForwardRounds: 123, BytesSent: 1 << 30, BytesRecv: 5 << 20, RandomnessBytes: 7 << 40, Seconds: 12.5}
	got, err := decodeResult(encodeResult(&r), j)
	if err != nil {
		t.Fatal(err)
	}
	want := r.Stats
	want.Shard, want.Batches = j.Shard, len(r.Batches)
	if got.Stats != want {
		t.Fatalf("figures %+v after a round trip, want %+v", got.Stats, want)
	}
	cases := []struct {
		name string
		f    func(s *selection.ShardStats)
	}{
		{"attempts", func(s *selection.ShardStats) { s.Attempts = maxShardAttempts + 1 }},
		{"resumed", func(s *selection.ShardStats) { s.Resumed = len(r.Batches) + 1 }},
		{"rounds", func(s *selection.ShardStats) { s.ForwardRounds = maxShardRounds + 1 }},
		{"negative rounds", func(s *selection.ShardStats) { s.ForwardRounds = -1 }},
		{"bytes sent", func(s *selection.ShardStats) { s.BytesSent = maxShardBytes + 1 }},
		{"bytes received", func(s *selection.ShardStats) { s.BytesRecv = -1 }},
		{"dealer bytes", func(s *selection.ShardStats) { s.RandomnessBytes = math.MaxInt64 }},
		{"seconds", func(s *selection.ShardStats) { s.Seconds = 400 * 24 * 3600 }},
		{"NaN seconds", func(s *selection.ShardStats) { s.Seconds = math.NaN() }},
	}
	for _, c := range cases {
		bad := Result{Batches: r.Batches, Stats: r.Stats}
		c.f(&bad.Stats)
		if _, err := decodeResult(encodeResult(&bad), j); err == nil {
			t.Errorf("%s: %+v accepted", c.name, bad.Stats)
		}
	}
	// A worker saturates figures beyond the bounds: accepted.
	huge := Result{Batches: r.Batches, Stats: selection.ShardStats{Attempts: 1 << 30, ForwardRounds: 1 << 50, BytesSent: 1 << 60,
		BytesRecv: 1 << 60, RandomnessBytes: 1 << 60, Seconds: 1e12}.Bounded()}
	if got, err := decodeResult(encodeResult(&huge), j); err != nil || got.Stats.BytesSent != maxShardBytes || got.Stats.Attempts != maxShardAttempts {
		t.Errorf("saturated figures: %+v, %v", got, err)
	}
	b := encodeResult(&r)
	if _, err := decodeResult(b[:len(b)-1], j); err == nil {
		t.Errorf("a result without its last byte accepted")
	}
	if _, err := decodeResult(append(slices.Clone(b), 0), j); err == nil {
		t.Errorf("a result with a byte more accepted")
	}
}

// FuzzDecodeResult: decodeResult never panics and what it accepts is the
// job's shard, with figures within their bounds. The job is small (shard 2
// of 2 of a phase of 20 candidates: one batch of 4), so that its results
// are too (the fuzzing engine stalls on KB seeds).
func FuzzDecodeResult(f *testing.F) {
	j := testJob()
	j.PhaseCandidates, j.FirstBatch, j.Candidates = 20, 1, []int{30, 31, 32, 33}
	r := Result{Batches: []selection.BatchShares{{Batch: 1, Epoch: 1, Shares: []uint64{1, 2, 3, 4}}},
		Stats: selection.ShardStats{Attempts: 1, ForwardRounds: 10, BytesSent: 100, BytesRecv: 100, RandomnessBytes: 100, Seconds: 1}}
	good := encodeResult(&r)
	if _, err := decodeResult(good, j); err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[len(good)-resultStatsLen:])
	f.Add([]byte(resultMagic + "\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		// A short input replaces the end of a good result (the figures
		// first): other sizes are refused by their size alone.
		if len(b) < len(good) {
			b = append(slices.Clone(good[:len(good)-len(b)]), b...)
		}
		out, err := decodeResult(b, j)
		if err != nil {
			return
		}
		s := out.Stats
		if len(out.Batches) != 1 || len(out.Batches[0].Shares) != 4 || s.Attempts > maxShardAttempts || s.Resumed > 1 ||
			s.ForwardRounds < 0 || s.ForwardRounds > maxShardRounds || s.BytesSent < 0 || s.BytesSent > maxShardBytes ||
			s.BytesRecv < 0 || s.BytesRecv > maxShardBytes || s.RandomnessBytes < 0 || s.RandomnessBytes > maxShardBytes ||
			s.Seconds < 0 || s.Seconds > 366*24*3600 || binary.LittleEndian.Uint32(b[4:]) != 1 {
			t.Fatalf("accepted %+v", s)
		}
	})
}
