// Package lanes is the batch scheduler of a selection run: the one place
// that decides where one party's secure computation runs. A Scheduler owns
// the streams of a run's protocol sessions (a control session and W batch
// lanes, each with its own session), assigns the j-th pending batch of a
// phase to lane j mod W, positions the party's provider so that every batch
// draws its dealer material from its own counter range (whatever the order
// in which batches run or finish, and the same with the pipeline on or
// off), hands out each phase's weight ids, and fetches the material of
// upcoming batches ahead of their run.
//
// # Counter layout
//
// In epoch e (one per run of a session, 1..MaxEpoch−1) every stream starts
// at counter e<<EpochShift; on a lane's stream batch b of phase i starts at
//
//	e<<EpochShift | i<<32 | (b/W)<<18
//
// so a run has at most MaxPhases phases, a lane at most MaxLaneBatches
// batches per phase and a batch at most MaxBatchItems dealer items (checked
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
// batch and the partial last one (protocol.Rehearse: the requests of a
// computation depend on its public shapes alone), and then draws each
// lane's next batch by that script (protocol.Prefetch: one round trip to a
// networked dealer per batch) while the lane's current batch runs, as long
// as the material held fits the budget. A batch that starts before its
// material is fetched draws directly, and is checked against the script
// afterwards; a batch that departs from the script fails with an error
// naming the template. Prefetching changes when material is drawn, never
// which: every batch draws the same kinds at the same counters either way.
//
// The package imports protocol, beaver, transport and share; package
// selection builds one Scheduler per run from its Params.
package lanes
