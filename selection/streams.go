package selection

import "github.com/selectformer/selectformer/selection/lanes"

// Stream ids used on the connection.
const (
	// StreamControl carries the clear messages (hello, coin, bootstrap, archs).
	StreamControl uint32 = 1
	// StreamSession carries the control session (weight sharing, QuickSelect,
	// appraisal).
	StreamSession uint32 = 2
	// StreamSlotBase is the stream of batch lane 0; lane w uses
	// StreamSlotBase + w.
	StreamSlotBase uint32 = 16
)

// EpochShift places each run's correlated randomness in its own counter
// range: in epoch e every stream starts at counter e << EpochShift (the
// batch lanes' counter layout, lanes.EpochShift).
const EpochShift = lanes.EpochShift

// MaxEpoch bounds the epochs of a session: e << EpochShift must not wrap
// around, so every epoch lies in 1..MaxEpoch−1. A peer announcing an epoch
// outside that range is refused (EpochError), and a session whose epochs
// are used up refuses to run another.
const MaxEpoch = lanes.MaxEpoch

// MaxEpochLead is the most a peer's epoch may lead this party's in the
// handshake. Each party adds one to its own epoch before every run (before
// the handshake) and both adopt the larger after it, so honest epochs
// differ only by the runs one party started whose handshake the other
// never completed (the other side failed or was refused before its own
// hello): a few, one per manual restart. A larger lead is refused
// (EpochError): a forging peer can then advance this party's epoch by at
// most MaxEpochLead per run, and never onto an epoch it already used.
const MaxEpochLead = 1024
