// Package lanes is the batch scheduler of a selection run: the one place
// that decides where one party's secure computation runs. A Scheduler owns
// the streams of a run's protocol sessions (a control session and the batch
// lanes, each with its own session), cuts a phase's candidates into
// batches of the phase's size (Batches, Span: each phase may have its own)
// and assigns the j-th pending batch of a phase to lane j mod W (W, the
// phase's lanes: each phase may run its own number, at most the lanes
// opened), positions the party's provider so
// that every batch draws its dealer material from its own counter range
// (whatever the order in which batches run or finish, and the same with
// the pipeline on or off), hands out each phase's weight ids, and fetches
// the material of upcoming batches ahead of their run.
//
// # Counter layout
//
// In epoch e (one per run of a session, 1..MaxEpoch−1) every stream starts
// at counter e<<EpochShift; on a lane's stream batch b of phase i starts at
//
//	e<<EpochShift | i<<32 | (b/W)<<18
//
// (W the phase's lanes: phases have ranges of their own, so one phase's
// lanes never meet another's counters whatever their numbers), so a run
// has at most MaxPhases phases, a lane at most MaxLaneBatches batches per
// phase and a batch at most MaxBatchItems dealer items (checked
// before each draw). Weight ids of phase i start at e<<EpochShift | i<<32.
//
// # Pipeline and prefetch
//
// With Config.Pipeline on, every lane runs at once (a batch starts as soon
// as its lane's previous batch is done) and a protocol.ComputeGate lets one
// lane per core compute, the oldest batch first; off, one batch runs at a
// time in ascending order. Either way the lowest unfinished batch runs on
// both sides, so the two parties' schedules cannot deadlock whatever mode
// each picks.
//
// With the pipeline on and a memory budget, Run first rehearses a full
// batch of the phase (of the phase's size) and the partial last one (protocol.Rehearse: the requests of a
// computation depend on its public shapes alone), and then draws each
// lane's next batch by that script (protocol.Prefetch: one round trip to a
// networked dealer per batch) while the lane's current batch runs, as long
// as the material held fits the budget. A batch that starts before its
// material is fetched draws directly, and is checked against the script
// afterwards; a batch that departs from the script fails with an error
// naming the template. Prefetching changes when material is drawn, never
// which: every batch draws the same kinds at the same counters either way.
//
// # No wait across the parties' lanes
//
// With a dealer-free provider (package beaver/ot) every item is a protocol
// of the two parties on the lane's stream, so a party's lanes wait on the
// peer's lanes not only in the forward but also for material. Whatever the
// lanes, batch size, prefetch budget and phase, the schedule cannot
// deadlock because nothing a party holds is held while it waits on the
// peer:
//
//   - a lane's compute slot (protocol.ComputeGate) is given back while the
//     lane waits for its peer or for material that is not at hand (the
//     lane's provider says which: Ready, protocol.MaterialReady), so the
//     other lanes compute meanwhile and draw their halves of the peer's
//     items;
//   - a lane's producer waits only for its own lane (the previous batch
//     claimed and fetched, a free share of the budget or the batch's start,
//     room in its window), never for another lane's progress;
//   - the provider's item on a stream waits only for the stream's earlier
//     items and the peer's half of itself (package beaver/ot's invariant: a
//     Lattice's uploads run on a service of their own).
//
// On d5bf317 the first rule did not hold (a lane waited for material with
// its slot held) and neither did the last (a Lattice's party 1 made an
// item wait for the stream that loaded an encryption): the lanes of the
// two parties holding both slots waited for material whose other halves
// the peer's lanes, queued for the peer's slots or blocked by full
// windows, never drew (issue 38's hang of mpcbench select --provider he;
// bench's TestSelectDealerFreeNoHang runs the dealer-free providers under
// that shape).
//
// The package imports protocol, beaver, transport and share; package
// selection builds one Scheduler per run from its Params.
package lanes
