// Package bench is selectformer's benchmark harness library: it measures the
// rounds, bytes, dealer traffic, wall time and memory of the secure
// computation, with both parties in one process or each in its own. The
// commands under bench/cmd use it (mpcbench forward, select and report;
// linkem); measured figures are recorded in bench/RESULTS.md.
//
// The computation itself lives in the library packages (protocol for the
// online protocols, proxy/secure for the secure proxy forward); this package
// only drives and measures it:
//
//   - RunLocal runs a function as party 0 and party 1 concurrently in this
//     process: a transport.Pipe (optionally link-emulated), an in-process
//     dealer, two protocol sessions, the cost of each party and optionally
//     the peak Go heap. A failing party cancels the other and its error is
//     reported first.
//   - Meter measures one party's cost (stream rounds and bytes, dealer
//     traffic) over a span of a session.
//   - Forward measures one secure.Prepared.Forward of a batch of random
//     candidates through a network of random weights (secure.RandomNet; costs
//     do not depend on values) of a named target shape (Shapes, ShapeArch):
//     BERT-base, DistilBERT, ViT-small or ViT-base, as a SelectFormer proxy or
//     the exact "Oracle" model. RunForwardParty runs one party's side over an
//     established session, for parties in separate processes, and
//     NewForwardResult assembles their reports.
//   - Select measures a whole selection of a Workload (the paper's settings:
//     Workloads; a small TinyWorkload for tests): the real pipeline
//     (selection.ModelOwner and selection.DataOwner with checkpoints, the
//     dealer, the secure forward of random networks of each phase's shape,
//     QuickSelect) on a sample of synthetic candidates, without a link and
//     over an emulated one (RunSelect; RunSelectParty runs one party, for
//     separate processes, and NewSampleRun assembles their records); it
//     measures QuickSelect at the full pool's sizes (MeasureTopK, with
//     ExpectedComparisons and TopKModel for other sizes) and projects the
//     run to the full pool with its bandwidth, latency and compute bounds
//     (Project, Bounds). The dealer is a third host: SelectConfig.DealerLinks
//     puts it behind a link of its own to each party (in process a
//     networked dealer over link-emulated pipes; separate processes reach
//     it through relays), and the bandwidth bound is the largest of each
//     link's (Bounds.Links: P0↔P1, dealer↔P0, dealer↔P1, its busiest
//     direction ÷ its bandwidth; Projection.LimitingLink names it);
//     SelectReport.RunDeployment adds the same sample with the dealer
//     placed elsewhere (DealerBesideP1: beside the data owner on a LAN). SelectConfig.Pipeline picks selection's batch
//     scheduler mode (pipelined lanes, or one batch at a time) and the
//     projection's critical path follows it, phase by phase on each
//     phase's lanes (LanesInFlight; Phase.Workers gives a phase its own)
//     and in batches of the phase's size (Workload.PhaseBatchSize;
//     Phase.BatchSize gives a phase its own);
//     SelectReport.RunOff adds the pipeline-off baseline over the link and
//     Gain compares the two. SelectReport.Compare cross-checks a run of
//     separate processes against the in-process emulation.
//   - ProjectShards projects the same sample on K worker pairs per party
//     (issue 28's sharded selection; `mpcbench select --shards K`): per
//     phase the candidates split into ShardSizes (contiguous, at batch
//     boundaries), each pair runs its shard over its own link at the
//     sample's measured rate so the largest shard sets the pace, a dealer
//     host per pair (the default, as deployed) shares nothing while one
//     serving every pair (ShardConfig.Dealers 1) carries every shard's
//     dealer traffic on its links,
//     the workers gather 8 B per candidate to their coordinators over
//     each party's internal network, and QuickSelect runs at the full size
//     on the coordinators' link; with one pair it is Project exactly.
//     ShardScaling is the arithmetic of the measured check (a run of K
//     worker pairs as processes of the peer binaries against one pair's:
//     mpcbench select --shards K --processes).
//   - ModuleCosts says where the bytes of one proxy forward go (SST2Phase0:
//     sst2-distilbert's phase-0 proxy): the steps of the exact cost table
//     (secure.ForwardCostRows), each with the dealer bytes of the requests
//     drawn during its rounds; ModuleTable.Check verifies the rows add up
//     to the measured forward (`mpcbench forward --by-module`, and a
//     section of `mpcbench report`).
//   - Relay is the link-emulating TCP relay of the linkem command;
//     HeapSampler samples the Go heap per phase; CurrentMachine, the
//     markdown writers and WritePlots (gonum/plot PNGs) make the report of
//     `mpcbench report`.
//
// Real deployments do not use this package: each party runs selection's
// driver in its own process over transport.Dial and a networked dealer.
package bench
