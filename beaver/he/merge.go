package he

// Products on the same encrypted weights share one pass over them.
//
// A data owner's lanes (16 at sst2's defaults) each ask for the products of
// the same proxy, so while one product holds the admission (one at a time:
// Scheme.accumulating) others wait for it, often on the same weights. A
// pass over a matrix's weight ciphertexts streams their c0 from memory and
// regenerates their seeded c1 (compact weights): per pass, not per row.
// When the admission frees, its next holder therefore takes every waiting
// product on the same weights (the same *Weights in the same order, the
// same layout and width) and runs them as one product whose rows are theirs
// stacked, each padded to whole row blocks: the same ciphertext–plaintext
// products, one weight stream and one regeneration. Each product then gets
// its own output blocks, re-randomised and flooded with its own key, so the
// outputs are exactly those of separate passes.
//
// Nothing waits for a product that has not arrived: the holder takes only
// what is already waiting, and a product taken by another holder is done
// when that holder lets the admission go. So the admission still holds
// nothing but CPU and cannot deadlock.

import "sync/atomic"

// maxMergedAccumulatorBytes bounds the accumulators of one merged pass
// (1.5 MiB per output block with the AVX2 limb sums): a pass takes other
// products only while their blocks fit (its own always run). At sst2's
// defaults a product has 3 to 24 blocks.
const maxMergedAccumulatorBytes = 48 << 20

// mulJob is one product waiting for the admission: mulMaskedRaw's
// arguments, its key, and (once done is closed) its results.
type mulJob struct {
	terms []Term
	l     Layout
	m, n  int
	R     []uint64
	key   []byte
	final bool
	rb    int // row blocks, ceil(m/MW)

	taken bool // by a holder of the admission (under Scheme.mergeMu)
	done  chan struct{}
	out   *Output
	raws  []rawBlock
}

// blocks returns the job's output blocks.
func (j *mulJob) blocks() int { return j.rb * ceilDiv(j.n, j.l.NW) }

// sharesPass reports whether o can share j's pass: the same weights in
// the same order, layout, width and kind of result.
func (j *mulJob) sharesPass(o *mulJob) bool {
	if o.l != j.l || o.n != j.n || o.final != j.final || len(o.terms) != len(j.terms) {
		return false
	}
	for i := range j.terms {
		if o.terms[i].W != j.terms[i].W {
			return false
		}
	}
	return true
}

// MergeStats counts the products the scheme computed and the passes over
// weights they took: products − passes were computed in another
// product's pass.
type MergeStats struct {
	Products, Passes int64
}

// MergeStats returns the scheme's counts so far.
func (s *Scheme) MergeStats() MergeStats {
	return MergeStats{Products: s.nProducts.Load(), Passes: s.nPasses.Load()}
}

// admit runs job j: it waits for the admission unless another holder takes
// j first, and as a holder runs j with every waiting product that shares
// its pass. It returns when j's results are set.
func (s *Scheme) admit(j *mulJob) {
	s.mergeMu.Lock()
	s.waiting = append(s.waiting, j)
	s.mergeMu.Unlock()
	select {
	case <-j.done:
		return
	case s.accumulating <- struct{}{}:
	}
	pass := s.take(j)
	if pass != nil {
		s.runPass(pass)
	}
	<-s.accumulating
	<-j.done // closed by runPass: by this holder, or by the one that took j
}

// take removes j, unless another holder took it, and the waiting products
// that share its pass and fit maxMergedAccumulatorBytes, from the queue.
func (s *Scheme) take(j *mulJob) []*mulJob {
	s.mergeMu.Lock()
	defer s.mergeMu.Unlock()
	if j.taken {
		return nil
	}
	pass := []*mulJob{j}
	blocks := j.blocks()
	budget := maxMergedAccumulatorBytes / s.blockAccumulatorBytes()
	kept := s.waiting[:0]
	for _, o := range s.waiting {
		switch {
		case o == j:
		case j.sharesPass(o) && blocks+o.blocks() <= budget: // a taken product has left the queue
			pass = append(pass, o)
			blocks += o.blocks()
		default:
			kept = append(kept, o)
			continue
		}
		o.taken = true
	}
	clear(s.waiting[len(kept):])
	s.waiting = kept
	return pass
}

// blockAccumulatorBytes is the memory of one output block's accumulators.
func (s *Scheme) blockAccumulatorBytes() int { return 3 * 2 * len(s.p.Q) * s.n * 8 }

// runPass computes the products of pass (pass[0]'s weights, layout and
// width for all) in one pass over the weights, finishes every product's
// output blocks and closes their done channels.
func (s *Scheme) runPass(pass []*mulJob) {
	now := s.nAccumulating.Add(1)
	for {
		if peak := s.peakAccumulating.Load(); now <= peak || s.peakAccumulating.CompareAndSwap(peak, now) {
			break
		}
	}
	defer s.nAccumulating.Add(-1)
	if s.onAccumulate != nil {
		s.onAccumulate()
	}
	j0 := pass[0]
	l, n := j0.l, j0.n
	cbOut := ceilDiv(n, l.NW)
	// The rows of the pass: each product's, padded to whole row blocks.
	rb, m := j0.rb, j0.m
	first := make([]int, len(pass)) // each product's first row block
	if len(pass) > 1 {
		rb = 0
		for i, j := range pass {
			first[i] = rb
			rb += j.rb
		}
		m = rb * l.MW
	}
	nb := rb * cbOut
	// Tiles of T coefficients keep one tile's accumulators of all blocks in
	// cache while the weights stream through once.
	T := s.n
	for T > 64 && nb*32*T > 256<<10 {
		T /= 2
	}
	acc := s.newAccumulators(nb, l.NW, T)
	for ti, t := range j0.terms {
		if len(pass) > 1 {
			k := t.W.k
			A := make([]uint64, m*k)
			for i, j := range pass {
				copy(A[first[i]*l.MW*k:], j.terms[ti].A)
			}
			t = Term{W: t.W, A: A}
		}
		s.accumulate(t, l, m, rb, cbOut, acc, T)
	}
	var blocks []struct{ job, ab, bi int }
	for i, j := range pass {
		nbj := j.blocks()
		j.out = &Output{M: j.m, N: j.n, Layout: l, blocks: make([]outBlock, nbj), s: s}
		if !j.final {
			j.raws = make([]rawBlock, nbj)
		}
		for bi := range nbj {
			blocks = append(blocks, struct{ job, ab, bi int }{i, first[i]*cbOut + bi, bi})
		}
	}
	parallel(len(blocks), func(b int) {
		x := blocks[b]
		s.finishBlock(pass[x.job], acc, x.ab, x.bi)
	})
	acc.release()
	s.nProducts.Add(int64(len(pass)))
	s.nPasses.Add(1)
	for _, j := range pass {
		close(j.done)
	}
}

// mergeCounters are the Scheme's counts behind MergeStats.
type mergeCounters struct {
	nProducts, nPasses atomic.Int64
}
