package ot

import "fmt"

// ferretParams is one parameter set of Ferret's primal LPN with regular
// noise (Yang, Weng, Lan, Zhang and Wang, "Ferret: Fast Extension for
// coRRElated oT with small communication", ACM CCS 2020, ePrint 2020/924):
//
//   - n: the COTs one iteration makes, the length of the LPN codeword and
//     of the noise vector;
//   - k: the LPN dimension, the base COTs the encoding consumes (the
//     secret u of the receiver, the sender's Q under Δ);
//   - t: the noise weight, one noise position in each of t bins;
//   - logBin: log2 of a bin's size, the depth of each bin's GGM tree, so
//     that n = t·2^logBin; each tree consumes logBin base COTs.
//
// An iteration consumes reserve() = k + t·logBin + 128 COTs of the
// previous one (the last 128 for the consistency check, ferret_check.go)
// and yields n − reserve() new ones.
type ferretParams struct{ n, k, t, logBin int }

// ferretCodeWeight is d, the nonzeros per column of the local linear code
// (the public k×n generator matrix A): every output COT is the sum of d
// base COTs and one MPCOT position, Ferret's choice (§6, d = 10).
const ferretCodeWeight = 10

// ferretMaxN bounds n (2^27 COTs, 2 GiB of blocks per party): far above
// the sets below, only a guard on the memory an iteration allocates.
const ferretMaxN = 1 << 27

// The parameter sets. The main set and the setup set are emp-ot's
// ferret_b13 (emp-toolkit/emp-ot, as ported in sine-fdn/polytune,
// src/otext/constants.rs, FERRET_B13): n = 10,485,760, t = 1,280,
// k = 452,000, bins of 2^13; the setup set n = 470,016, t = 918,
// k = 32,768, bins of 2^9. These are the sets revised after Briaud and
// Øygarden's algebraic attack on regular syndrome decoding ("A new
// algebraic approach to the regular syndrome decoding problem and
// implications for PCG constructions", EUROCRYPT 2023), which lowered the
// cost of attacking Ferret's original sets (n = 10,608,640, t = 1,295,
// k = 589,824 in earlier emp-ot releases) below their claimed level; the
// revised sets are emp-ot's claim of 128-bit computational security for
// regular-noise LPN over F2 with a d = 10 local code, which we adopt as
// stated and have not re-estimated.
var (
	// ferretMain makes 10,016,992 COTs per iteration from a reserve of
	// 468,768.
	ferretMain = ferretParams{n: 10_485_760, k: 452_000, t: 1_280, logBin: 13}
	// ferretSetup turns 41,158 base COTs into 470,016, enough for
	// ferretMain's reserve (its first iteration's base).
	ferretSetup = ferretParams{n: 470_016, k: 32_768, t: 918, logBin: 9}
)

// reserve returns the base COTs an iteration consumes: k for the LPN
// secret, logBin for each of the t trees and ferretCheckOTs for the
// consistency check, in that order.
func (p ferretParams) reserve() int { return p.checkFirst() + ferretCheckOTs }

// checkFirst returns the index in the reserve of the check's first COT,
// k + t·logBin.
func (p ferretParams) checkFirst() int { return p.k + p.treeOTs() }

// outputs returns the usable COTs of an iteration, n − reserve().
func (p ferretParams) outputs() int { return p.n - p.reserve() }

// treeOTs returns the base COTs of an iteration's trees, t·logBin.
func (p ferretParams) treeOTs() int { return p.t * p.logBin }

// bin returns a bin's size, 2^logBin.
func (p ferretParams) bin() int { return 1 << p.logBin }

// check refuses a set that is not a valid Ferret instance: n = t·2^logBin,
// d ≤ k < n (a column has d distinct rows), and a reserve below n, so that
// an iteration yields more COTs than it consumes.
func (p ferretParams) check() error {
	switch {
	case p.logBin < 1 || p.logBin > 24:
		return fmt.Errorf("ot: ferret: bins of 2^%d, want 2^1 … 2^24", p.logBin)
	case p.t < 1 || p.n < 1 || p.n > ferretMaxN:
		return fmt.Errorf("ot: ferret: n = %d, t = %d: want 1 ≤ t and 1 ≤ n ≤ %d", p.n, p.t, ferretMaxN)
	case p.n != p.t<<p.logBin:
		return fmt.Errorf("ot: ferret: n = %d is not t·2^logBin = %d·2^%d", p.n, p.t, p.logBin)
	case p.k < ferretCodeWeight || p.k >= p.n:
		return fmt.Errorf("ot: ferret: k = %d, want %d ≤ k < n = %d", p.k, ferretCodeWeight, p.n)
	case p.reserve() >= p.n:
		return fmt.Errorf("ot: ferret: reserve k + t·logBin + %d = %d is not below n = %d", ferretCheckOTs, p.reserve(), p.n)
	}
	return nil
}

// ferretConfig is the parameters of a Ferret instance: an optional setup
// set (zero when the base COTs already fill the main reserve) whose first
// iteration bootstraps from the base COTs, and the main set. The first
// max(1, warm) iterations run the setup set (each keeping the next one's
// reserve), every later one the main set: a warm-up of small iterations
// (0.43 M COTs each with ferretSetup) lets a session that needs few COTs
// never pay for a main iteration's 10 M COTs and 160 MB.
//
// With overlap the receiver sends the next iteration's first message
// (its trees' choices) before it receives this one's check hash, so that
// a chain of iterations takes one round trip each instead of two: worth
// it for a small set, whose iterations a lane's demand turns over every
// few candidates (with the main set it would make the sender hold one
// buffer of 168 MB more). The sender is unchanged.
//
// chains is the number of independent instances the direction runs (0
// means one), each on its own stream, base COTs and keys, whose iterations
// run side by side: over a WAN a chain makes one iteration a round trip.
type ferretConfig struct {
	setup, main ferretParams
	warm        int
	overlap     bool
	chains      int
}

// ferretMaxChains bounds ferretConfig.chains (and the provider's streams
// below its base: silentMaxStream).
const ferretMaxChains = 2

// chainCount returns the chains of the configuration, at least one.
func (c ferretConfig) chainCount() int { return max(1, c.chains) }

// ferretB13 is emp-ot's configuration: one ferretSetup iteration, then
// ferretMain.
var ferretB13 = ferretConfig{setup: ferretSetup, main: ferretMain}

// ferretPoolConfig is the configuration of a session's silent-OT pools
// (ferret_pool.go): ferretB13 with sixteen setup-set iterations first, so
// that a session needing fewer than 6.9 M COTs a direction (tests, small
// selections) never runs a main iteration (at 5.2 bits a COT, where a main
// iteration costs 0.44, the warm-up adds 4.5 MB a direction to a
// selection's gigabytes). The setup set is emp-ot's parameter claim as much as the main
// one; each of its iterations has a fresh LPN secret (the reserve), fresh
// noise and its own public code, as each main iteration has.
var ferretPoolConfig = ferretConfig{setup: ferretSetup, main: ferretMain, warm: 16}

// ferretSmallPoolConfig runs the setup set for every iteration: 428,858
// COTs an iteration from buffers of 7.5 MB instead of 168 MB, at 5.2
// bits a COT instead of 0.44, its iterations overlapped, in two chains:
// over the paper's WAN (100 ms round trips) one chain made 1.6–1.8 M COTs a
// second and 2.6–3.1 M overlapped, below the 3.6 M a second that a data
// owner's phase 1 at 25 candidates a second takes in this direction (146 k
// a candidate); two overlapped chains made 4.4–4.5 M
// (BenchmarkSilentPoolLink).
var ferretSmallPoolConfig = ferretConfig{main: ferretSetup, overlap: true, chains: 2}

// ferretPoolConfigs are the configurations of a session's two silent-OT
// directions, indexed by the party that holds Δ. Party 1, the data owner,
// holds Δ in the direction that makes fewer COTs (sst2's phase-1 candidate
// takes 146 k COTs there against 283 k the other way) and runs it on the
// small set: a sender keeps two iteration buffers (ferret_pool.go), and
// two of the main set's were 336 MB of a data owner's heap, whose phase 3
// sits at its memory target (issue 38). The small set's bytes add about
// 87 kB a phase-1 candidate (4.76 bits for each of the 146 k COTs).
var ferretPoolConfigs = [2]ferretConfig{ferretPoolConfig, ferretSmallPoolConfig}

// ferretMaxWarm bounds ferretConfig.warm.
const ferretMaxWarm = 1 << 10

// hasSetup reports whether the configuration starts with a setup
// iteration.
func (c ferretConfig) hasSetup() bool { return c.setup != ferretParams{} }

// first returns the set of the first iteration.
func (c ferretConfig) first() ferretParams { return c.at(0) }

// at returns the set of iteration i (0 the first).
func (c ferretConfig) at(i uint64) ferretParams {
	if c.hasSetup() && i < uint64(max(1, c.warm)) {
		return c.setup
	}
	return c.main
}

// usable returns the COTs of iteration i that are handed out: its set's n
// less the next iteration's reserve.
func (c ferretConfig) usable(i uint64) int { return c.at(i).n - c.at(i+1).reserve() }

// baseCOTs returns the base COTs a fresh instance needs: the first
// iteration's reserve.
func (c ferretConfig) baseCOTs() int { return c.first().reserve() }

// check validates both sets and that the setup iteration's output covers
// the main reserve.
func (c ferretConfig) check() error {
	if c.chains < 0 || c.chains > ferretMaxChains {
		return fmt.Errorf("ot: ferret: %d chains, want 0 … %d", c.chains, ferretMaxChains)
	}
	if err := c.main.check(); err != nil {
		return fmt.Errorf("main set: %w", err)
	}
	if !c.hasSetup() {
		return nil
	}
	if err := c.setup.check(); err != nil {
		return fmt.Errorf("setup set: %w", err)
	}
	if c.setup.n < c.main.reserve() {
		return fmt.Errorf("ot: ferret: setup makes %d COTs, the main reserve needs %d", c.setup.n, c.main.reserve())
	}
	if c.warm < 0 || c.warm > ferretMaxWarm {
		return fmt.Errorf("ot: ferret: %d warm-up iterations, want 0 … %d", c.warm, ferretMaxWarm)
	}
	return nil
}
