// Package topk is the secure top-k of shared values: QuickSelect steps
// whose comparison outcomes are revealed. TopK selects the k largest of n
// secret-shared fixed-point values (the entropies of a selection phase) and
// returns their positions; both parties learn the outcome of every
// comparison it makes and nothing else. Stats counts its comparisons,
// steps and rounds.
//
// It imports only protocol and share: the selection package calls it once
// per phase (selection.TopK is a thin wrapper), and bench measures it.
//
// # Algorithm
//
// TopK is a sample-based multi-pivot QuickSelect whose steps each run ONE
// secure comparison on every pair the step compares: the bounded
// protocol.CompareRevealBounded (6 rounds) or, for encodings with more than
// 17 fractional bits, protocol.CompareReveal (7 rounds); see "Range". With m
// values still active (those whose membership is not yet known) and a
// budget of B = 8·n comparisons per step (at least 4,096, at most 2^22):
//
//   - sort: if all m(m−1)/2 pairs fit in B, compare every pair of the active
//     values; their order settles the selection and TopK ends.
//   - rank: otherwise, if no sorted sample is at hand, draw a uniform random
//     sample S of the active values and compare every pair of S and every
//     other active value with every member of S: S's order and each value's
//     rank among S. The values in better buckets than the boundary's (and
//     the members of S above it) are selected, the worse ones dropped; the
//     bucket between the two members of S adjacent to the boundary stays
//     active. |S| is the smallest sample for which that bucket is too large
//     for a sort step with probability at most 1% (computed exactly from
//     m, the number still needed and B; never from values), provided the
//     step makes at most max(B, 2^15) comparisons: a rank step saves the
//     6 rounds of a separate sample step, 300 ms on the paper WAN, and
//     2^15 comparisons cost about 15 ms of bytes and computation there
//     (the cost model is documented at rankStepBudget).
//   - sample: otherwise (the rank step would exceed its budget), draw a
//     uniform random sample of about 3·√m active values and compare every
//     pair of it: the sample's order.
//   - partition: if a sorted sample is at hand, pick p = min(B/m, sample
//     size) pivots from it (at least one), around the estimated position of
//     the k-th value (the outermost 3 standard deviations away), compare
//     every other active value with every pivot, and keep the bucket
//     between two adjacent pivots that holds the boundary: values in better
//     buckets (and better pivots) are selected, worse ones dropped. The
//     sample members in the kept bucket stay sorted and serve the next
//     partition step.
//
// Inputs of up to 91 values take one sort step. From 92 to about 800 values
// (the quickstart's 500 → 200 and 200 → 60) TopK takes a rank step and a
// sort, 12 rounds, planned for 99% of runs (sometimes the rank step alone,
// when a member of S sits at the boundary; otherwise a second rank step
// or a sample step follows); over 5,000 runs on clear ranks, 99.4% took at
// most 2 steps for 200 values keeping 60 (|S| = 11, about 13·n
// comparisons) and 98.9% for 500 keeping 200 (|S| = 32, about 32·n), where
// the sample, partition and sort steps took 2.7 and 2.9 steps on average
// (22.6·n and 13.5·n comparisons). For 1,000–42,000 values the rank step
// would exceed its budget and TopK
// takes 3 steps (sample, partition, sort), in some runs 4 (a second
// partition): 18–24 rounds where the single-pivot QuickSelect took 10–19
// steps (70–130 rounds at 7 rounds per step), for about 12–17·n
// comparisons instead of 3–4·n (see bench/RESULTS.md, "QuickSelect").
//
// # Range
//
// The values are fixed-point encodings (the entropies of a selection) with
// the session's FixedPoint f fractional bits. With f ≤ 17 (the default is
// 16) every step uses protocol.CompareRevealBounded, the sign circuit on
// 32-bit words (5 rounds and 128 bits per comparison and party instead of 6
// and 270, plus the opening), which is exact while any two values differ by
// less than 2^(31−f) in value: 32768 at f = 16, at least 2^14 for every
// f ≤ 17. Entropies lie in [0, ln C] for C classes, far inside it. Values
// further apart may be compared wrongly, and then the selection is wrong
// (nothing more is revealed: the outcome is still one masked bit). With
// f > 17 the bound would fall below 2^14, and TopK uses the 64-bit
// protocol.CompareReveal (7 rounds), exact for all |values| < 2^62.
//
// # What is revealed
//
// Values are never revealed. Both parties learn the outcome of every
// comparison the steps make, and nothing else (the sign circuit's openings
// are masked; CompareRevealBounded, CompareReveal). Concretely, beyond the
// selected set:
//
//   - rank steps: the complete order of the random sample S and each other
//     active value's rank among S (how many members of S rank above it):
//     a bucket among |S| + 1, finer than a partition step's among its p
//     pivots for the same sample, at most log2(|S|+1) bits per value (3.6
//     bits for 200 values keeping 60, 5 bits for 500 keeping 200);
//   - sample steps: the complete order of each random sample;
//   - partition steps: each active value's bucket among the step's pivots
//     (how many of them rank above it), so the pivots' order is refined by
//     which values fall between them;
//   - the sort step: the complete order of the last active group (at most
//     about √(16·n) values around the k-th: 820 for n = 42,000; 91 for
//     n ≤ 512).
//
// The single-pivot QuickSelect revealed each active value's side of one
// pivot per step; this reveals more order relations per step (counted in
// Stats.Sorted and Stats.Pivots). Which pairs are compared
// depends only on rng and on the outcomes of earlier steps, and each
// outcome only on the ranks of the two values compared, so everything
// revealed is a function of the ranks (the permutation that sorts the
// values by the order above) and the public coins: two inputs with the same
// ranks give the same outcomes and identically distributed transcripts
// (TestTopKViewDependsOnlyOnRanks).
package topk
