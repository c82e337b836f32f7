// Package selection is selectformer's public API: a model owner (party 0,
// ModelOwner) and a data owner (party 1, DataOwner) run a private
// multi-phase selection over a transport.Conn, each with its beaver.Provider
// (an in-process dealer's or a networked dealer's), and both obtain the same
// Result: the selected pool indices, per-phase statistics and, if asked, an
// appraisal.
//
// # Example
//
// A whole selection in one process (Example, run by go test; its helpers
// tinyViT, randomImages and labelBootstrap are in example_test.go): the
// model owner with its target model, the data owner with its pool and the
// public checkpoint's embedding tables, an in-process dealer and a pipe.
// Between hosts each party runs its half alone, over transport.Listen /
// transport.Dial and a networked dealer (dealer.Connect): see
// ExampleModelOwner_Run and ExampleDataOwner_Run.
//
//	ctx := context.Background()
//	target, pool := tinyViT(), randomImages(64) // the model owner's model, the data owner's pool
//	schedule, _ := selection.ParseSchedule("1:2:8@0.5,2:2:8")
//	params := selection.Params{PoolSize: 64, Budget: 20, Bootstrap: 16, Schedule: schedule} // public, equal on both sides
//	quiet := slog.New(slog.DiscardHandler)
//
//	d, _ := dealer.New()                          // dealer.Connect(ctx, dealerConn, party) between hosts
//	c0, c1 := transport.Pipe(transport.Options{}) // transport.Listen / transport.Dial between hosts
//	defer c0.Close()
//	defer c1.Close()
//	var res [2]*selection.Result
//	var errs [2]error
//	var wg sync.WaitGroup
//	wg.Add(2)
//	go func() { // model owner (party 0)
//		defer wg.Done()
//		prov, _ := d.Provider(0)
//		mo := &selection.ModelOwner{Params: params, Target: target, Generate: proxy.Config{Seed: 1},
//			Label: labelBootstrap, Logger: quiet}
//		res[0], errs[0] = mo.Run(ctx, c0, prov)
//	}()
//	go func() { // data owner (party 1)
//		defer wg.Done()
//		prov, _ := d.Provider(1)
//		do := &selection.DataOwner{Params: params, Pool: pool, Embedding: target, Logger: quiet}
//		res[1], errs[1] = do.Run(ctx, c1, prov)
//	}()
//	wg.Wait()
//	if errs[0] != nil || errs[1] != nil {
//		fmt.Println(errs[0], errs[1])
//		return
//	}
//	r := res[0]
//	fmt.Println("both parties agree:", fmt.Sprint(r.Selected) == fmt.Sprint(res[1].Selected))
//	fmt.Printf("buy %d points: the bootstrap (%d, already sent) and the selected (%d)\n",
//		len(r.Bootstrap)+len(r.Selected), len(r.Bootstrap), len(r.Selected))
//	for i, ph := range r.Phases {
//		fmt.Printf("phase %d kept %d of %d candidates\n", i+1, ph.Out, ph.In)
//	}
//
// What you buy is Result.Bootstrap (the sample the data owner sent in the
// clear for the model owner to label) plus Result.Selected (the points the
// secure selection chose among the rest): Params.Budget points in all.
//
// # Flow
//
//  1. Handshake in the clear (stream StreamControl): protocol version,
//     fixed-point parameters, pool size, budget, bootstrap size, schedule,
//     batch size, workers, appraisal mode, the SHA-256 of the public embedding
//     tables (model.EmbeddingHash), a hash of each side's whole view, how
//     its provider makes the correlations (beaver.Describe: "dealer", "ot"
//     or "he", and a digest of the HE parameters) and the sequence length
//     of its inputs (the data owner's padded pool; the model owner's
//     Generate.Public texts, 0 without). Any difference (of the sequence
//     lengths, when both announce one) ends the run on both sides, before
//     the coin, with a *MismatchError naming the field and both values, in
//     the syntax they are parsed from (Field is one of version, party,
//     fixed_point.frac_bits, fixed_point.int_bits, provider,
//     provider_params, pool_size, budget, bootstrap, schedule, batch_size,
//     workers, appraisal, seq, embedding_hash, view_hash, and shards in a
//     sharded run: see Sharding). An embedding_hash mismatch shows both
//     hashes short and says what to do (EmbeddingHint: the proxies share
//     the target's embedding tables, so both parties load the same
//     checkpoint, and fine-tuning freezes the embeddings). With
//     DataOwner.Items the data owner also announces the root of its
//     commitment to the pool (see The purchase), which both parties record
//     before the coin.
//  2. Joint coin toss (commit–reveal: party 0 sends SHA-256 of r0, party 1
//     sends r1, party 0 opens r0; seed = SHA-256(r0‖r1)). The seed drives
//     the bootstrap sample and every QuickSelect sample (share.NewPRG).
//  3. Bootstrap: the data owner sends the sampled candidates' inputs in the
//     clear (with their openings against its commitment, which the model
//     owner checks first); the model owner labels them (ModelOwner.Label; the labels
//     are checkpointed, State.Labelled, before anything else, and a
//     restart that receives the same points reuses them) and runs
//     proxy.Generate, unless pre-generated Proxies (or a substitute
//     Evaluator) are given. It then announces each phase's public
//     architecture, which the data owner checks against the schedule and
//     its embedding model.
//  4. Phases: the surviving candidates (pool indices ascending, the
//     bootstrap excluded) are split into batches of the phase's size
//     (Params.PhaseBatchSize: its own Phase.BatchSize, or
//     Params.BatchSize; batch b is candidates [b·size, (b+1)·size), the
//     checkpoint's batch numbers the phase's own; a last, partial batch
//     runs padded to a full one with repeats of its first candidate,
//     whose entropies are dropped, so that every batch draws the same
//     correlations); the proxy's weights are shared once per phase on the control session
//     (StreamSession); the batches run on the phase's W lanes
//     (Params.PhaseWorkers: its own Phase.Workers, or Params.Workers), lane
//     w on stream StreamSlotBase+w with its own protocol session, taking
//     the pending batches w, w+W, ... in order, each batch from its own
//     range of the lane's dealer counters (one batch scheduler, package
//     selection/lanes, opens the most lanes any phase runs, assigns
//     batches to lanes and positions the provider's counters). A phase of
//     a small proxy may run more lanes than the run's largest proxy lets
//     it hold in memory, and larger batches (a batch's rounds do not grow
//     with its size): the selected set is the same whatever the lanes and
//     sizes. With Params.Pipeline
//     on (the default) all lanes run at once, so the exchanges of the
//     batches in flight share each round trip, and the dealer material of
//     the batches is fetched ahead, within Params.MemoryBudget: before the
//     lanes start, each party rehearses a full batch of the phase's size and the partial last
//     one (protocol.Rehearse: the forward run against nobody, to learn the
//     dealer items a batch draws, which depend on shapes alone), so every
//     lane's batches, the first included, draw their items as one
//     pipelined sequence (protocol.Prefetch: one round trip to a networked
//     dealer per batch, not one per item); each QuickSelect step draws its
//     items ahead by the same mechanism (protocol.Session.Ahead). The lanes
//     are served by priority: one lane per core computes at once (a
//     protocol.ComputeGate slot, given back while the lane waits for its
//     peer), and both the slots and the link's frames go to the oldest
//     batch first, so that the batches in flight do not move in step (all
//     computing while the link idles, then all sending while the processor
//     idles); the order depends on public batch numbers alone. Off, one
//     batch runs at a time and every item is drawn when needed. The batches draw
//     the same material either way: the mode changes the delay, never the
//     entropies or the selection, and each party picks its own.
//     Then TopK keeps the phase's quota by a sample-based multi-pivot
//     QuickSelect on the shared entropies (steps of one
//     CompareRevealBounded each, 6 rounds, exact while two entropies differ
//     by less than 2^(31−f): 32768 at f = 16; 2 steps for 92 to about 800
//     candidates, 3–4 for 1,000–42,000),
//     revealing only comparison outcomes: the order of random samples,
//     each candidate's rank among a sample or bucket among a step's pivots
//     and the order of the last group around the cut, a function of the
//     entropies' ranks only (package selection/topk details it). Both
//     parties keep what the outcomes say of the survivors' order (their
//     tiers, PhaseState.Tiers and Result.Tiers) for the audit of the
//     purchase.
//  5. Appraisal (optional): the mean entropy of the final set is revealed
//     (AppraiseMean), or only the bit "mean > threshold" for the model
//     owner's private threshold (AppraiseThreshold, one CompareReveal).
//     When the last phase's entropy MLP outputs √H (secure.Arch.SqrtEntropy,
//     announced with the architectures), the selected scores are squared
//     first (one Square and one truncation), so the value is always a mean
//     entropy.
//
// # The purchase
//
// A DataOwner with Items commits to every candidate of its pool before
// anything is revealed (package selection/purchase: a Merkle root of
// salted candidates, the salts from a seed it keeps in its state), and its
// bootstrap points carry their openings. After the selection,
// DataOwner.Deliver writes the bundle of the purchased candidates (the
// bootstrap and the selected ones), and the model owner checks it with
// purchase.Verify against Result.Purchase (or ReadPurchase of its state
// directory): each candidate the one committed to, in order, none missing;
// with a purchase.Audit, each delivered candidate's plaintext score
// against the order its phases revealed. A ModelOwner with ItemInput (or
// RequireCommitment) buys only from a data owner that commits, and with
// ItemInput labels the bootstrap inputs the opened candidates give.
//
// # Checks before anything is revealed, and failures
//
// Run checks what its party can check before it says anything to the peer:
// the parameters, the model owner's target and proxy weights (finite, shapes
// as declared), its proxy generation settings (proxy.Config.Validate, after
// the defaults of proxy.Config.WithDefaults scaled to the bootstrap), its
// Label function and its appraisal threshold (within the fixed-point range),
// the data owner's pool (PoolSize candidates that fit the
// embedding checkpoint) and embedding weights, and both parties'
// checkpoints. A NaN checkpoint or a bad setting thus fails before the data
// owner sends its bootstrap sample.
//
// A party whose run fails, at any point, sends its peer an abort on stream
// StreamAbort and closes the connection. The abort carries a public reason
// code only (AbortCode: internal, cancelled, own input refused, handshake
// mismatch with the field's name, checkpoint, checkpoint of other
// parameters, bootstrap already sent, protocol violation, size bound), never
// the error's text, which may name files, settings, candidates, pool values
// or weights: that stays in the party's Run error and its log (a Warn
// record). The peer's Run returns a *PeerAbortError with the code's wording
// (or its own *MismatchError of a handshake mismatch); an unknown code is
// reported as "unknown abort code N", and a message over 256 bytes or of
// another form as unreadable. Every wait on the peer ends with the caller's
// context or the connection, so neither party waits for a peer that has
// given up.
//
// # Ties
//
// QuickSelect orders candidates by entropy descending, then by pool index
// ascending: of two candidates with equal (fixed-point) shared entropies the
// one with the smaller pool index ranks higher. The rule is applied inside
// the comparisons, so exactly k candidates survive.
//
// # Checkpoint and resume
//
// With a StateDir, each party writes its State (StateFile) atomically —
// temporary file, fsync, rename, directory fsync — after the handshake, the
// coin toss, the bootstrap, every finished batch (its entropy shares) and
// every QuickSelect. The model owner also saves generated proxies under
// StateDir/proxies. The layout of a state directory, per party p (both
// parties may share one directory):
//
//	state-p<p>.json                       the State (DecodeState; StateFile names it)
//	batches-p<p>/phase-<n>/batch-<b>.bin  one finished batch's entropy shares (DecodeBatchFile;
//	                                      phase n numbered from 1 (BatchDir; the file's header holds
//	                                      n−1), b the 0-based batch index:
//	                                      "SFB1" | party u8 | 3 zero bytes | phase u32 | batch u32 |
//	                                      epoch u64 | n u32 | n × u64 shares | CRC-32C, little-endian
//	proxies/phase-<n>/                    the model owner's generated proxy of phase n, numbered
//	                                      from 1 (ProxyDir; proxy.Load)
//	marks-p<p>.json                       the high-water marks of the correlated randomness the
//	                                      party drew, per session (marks.Provider; MarksFile names it)
//
// Phases are numbered from 1 wherever a person reads them — errors, log
// attributes ("phase=1"), progress, summaries, the ParseSchedule messages,
// proxy and batch directories — while the API indexes them from 0
// (Params.Schedule, Result.Phases, Progress.Phase) and so do the batch
// files' headers. A state directory written before the batch directories
// were numbered from 1 is renamed to this layout when a run loads it.
//
// Restarting both parties with the same state
// directories (and a new connection) resumes: the parties exchange summaries
// of their checkpoints in the handshake and keep only what both finished
// (same coin, same bootstrap, phases finished by both with the same
// survivors, and of the current phase the batches both finished); the rest
// is redone.
//
// Nothing revealed across crashes and restarts exceeds what one
// uninterrupted run reveals. The data owner records the bootstrap sample in
// its state (State.Revealed) before sending it; from then on it tosses no
// new coin for the session and sends, on any restart of either party, only
// the same points (a model owner that crashed before checkpointing the
// sample receives it again). A model owner restarted with an empty or
// altered state directory, which no longer holds the session's coin, is
// refused: the data owner's error wraps ErrBootstrapRevealed and the model
// owner receives it as the data owner's abort (AbortBootstrapRevealed). A data owner that accepts
// revealing another sample starts a new session with a fresh state
// directory. Without a StateDir the record lives in the DataOwner value
// only. A checkpoint file that is unreadable, malformed or of other
// parameters is a *StateError naming the file.
//
// Correlated randomness is keyed by a dealer session drawn from the joint
// coin (SHA-256 of the coin seed, so both parties contribute to it): Run
// binds the provider to it (beaver.Provider.BindSession) before drawing any
// material, so two selections never share a word even with the same dealer
// seeds, and a resumed selection (same coin) stays in its session. When
// the model owner's provider announces session budgets to a networked
// dealer (beaver.SessionBudgeter, found with beaver.As: a dealer.Client,
// wrapped or not), Run first sets it to DealerBudget of the proxies the
// phases will run
// (derived before they exist, from the target and the generation settings,
// or from the given or saved proxies): the parties, whose requests the
// dealer serves (each draws the dealer words of the kinds dealt to it; the
// budget counts every request's dealer work, whoever asks), can then draw
// together at most twice what an honest selection of these shapes draws.
// Within
// a session, correlated randomness is never reused: every run is a new
// epoch, and in epoch e every stream's provider counter is first moved to
// e<<EpochShift, weight ids start at e<<EpochShift too. Each party adds one
// to its persisted epoch before it says anything (so its run's epoch lies
// above every epoch it ran before), and after the handshake both adopt the
// larger of the two, persisted before anything is drawn. The handshake
// refuses a peer's epoch that could make the adopted one collide or wrap
// (an *EpochError, before anything is drawn): outside 1..MaxEpoch−1
// (2^24 − 1: e<<EpochShift must not overflow onto another epoch's
// counters), or more than MaxEpochLead (1024) ahead of this party's. Honest
// epochs differ only by the runs one party started whose handshake the
// other never completed, one per failed restart; a forging peer can advance
// an honest party's epoch by at most MaxEpochLead per run, never back onto
// an epoch that party used. A checkpoint of an epoch outside that range is
// a *StateError, and a session whose epochs are used up runs no more.
// Material is addressed by (stream, counter), so two epochs never touch the
// same item even with a deterministic dealer (same seeds): a run takes
// fewer than 2^40 items per stream (phases, a lane's batches and a batch's
// items are bounded: lanes.MaxPhases, lanes.MaxLaneBatches and
// lanes.MaxBatchItems, the last checked before each draw). A fresh dealer
// (dealer.New) after a restart is also fine.
//
// Independently of the epochs, each party keeps persistent high-water
// marks of the positions it drew (marks.Provider, in MarksFile: per stream
// counter and for weight ids, reserved an epoch at a time and written to
// disk before the material is drawn). Run wraps the party's provider in
// it, so no restart draws an item at a position the party drew before in
// the session, nor hands out a weight mask twice, whatever the peer says
// or its own state file was rolled back to: such a run fails with an
// error wrapping marks.ErrReuse before anything is drawn. This matters
// most to the model owner, who expands its material locally from its
// session seed: the dealer never sees its counters.
//
// Probabilistic truncation makes recomputed entropies differ from an
// uninterrupted run's by a few ulps, so a resumed run selects the same set
// when no two candidates at a selection boundary are within that error;
// the resume tests use well-separated values.
//
// # Sharding
//
// A selection may run each phase's secure forward on K worker pairs
// (ModelOwner.Shards and DataOwner.Shards, a ShardRunner: package
// selection/shard's Workers hand each phase's jobs to the party's worker
// processes over internal, mutually authenticated connections, and its
// Worker runs them). The coordinators — the two Runs — keep everything
// else: handshake (whose hello carries K: a mismatch is a MismatchError of
// field "shards"), coin, bootstrap, proxies, architectures, QuickSelect at
// full size, appraisal and checkpoints. A ShardRunner sees a phase as a
// ShardedPhase: its public facts, this party's coin, and the only ways
// into the coordinator's checkpoint: Record (each batch checked — its
// number, size and epoch — and checkpointed), Floor and RaiseFloor (the
// highest epoch at which a job's worker may have drawn, per dealer
// session: State.ShardFloors, written before the worker draws there) and
// AddStats (the workers' figures, bounded: ShardStats.Check); a batch it
// leaves unrecorded fails the phase. Each worker pair runs its shard as a
// ForwardRun, which keeps a run's guarantees (an epoch counted and
// persisted before anything is said, never at or below its Floor,
// persistent high-water marks, nothing drawn at the agreed epoch before
// ForwardHooks.Reached recorded it, every batch checkpointed, an abort in
// public words), with the pair's own handshake and close as hooks. A
// sharded phase's PhaseStats add the workers' figures (ShardStats: bytes
// summed over the coordinators' link and every pair's, the forward's
// rounds the largest pair's). Package selection/shard's comment says the
// rest: the jobs, their dealer sessions, retries, restarts and what
// crosses between the parties.
//
// # Progress
//
// Every batch is logged with log/slog (done/total, rate, ETA) and reported
// to the optional OnProgress callback.
//
// # References
//
//   - The method: X. Ouyang, F. X. Lin, Y. Ji, "SelectFormer: Private and
//     Practical Data Selection for Transformers", arXiv:2310.02373 (2023),
//     ICLR 2025: the bootstrap, the multi-phase schedule of proxies and the
//     selection by prediction entropy (§4.1). DESIGN.md at the module root
//     states the parties, the threat model and what a run reveals.
//   - The secure computation underneath: Beaver triples (D. Beaver,
//     "Efficient Multiparty Protocols Using Circuit Randomization",
//     CRYPTO '91) from a dealer as in CrypTen's trusted-third-party mode
//     (B. Knott et al., "CrypTen: Secure Multi-Party Computation Meets Machine
//     Learning", NeurIPS 2021); QuickSelect's comparisons are package
//     protocol's bit-sliced sign circuit on 32-bit words
//     (CompareRevealBounded, 6 rounds per comparison step; the 64-bit
//     CompareReveal, 7 rounds, for encodings with more than 17 fractional
//     bits); truncation is exact, unlike SecureML's local one
//     (P. Mohassel, Y. Zhang, IEEE S&P 2017).
package selection
