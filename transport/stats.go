package transport

import (
	"fmt"
	"sync/atomic"
)

// Stats are the traffic counters of a Conn or a Stream. Bytes are frame
// headers plus payloads as written to or read from the socket (see the
// package documentation for the exact rules, including the round rule).
type Stats struct {
	BytesSent int64 // bytes of frames sent (headers + payloads)
	BytesRecv int64 // bytes of frames received and consumed
	MsgsSent  int64 // messages sent
	MsgsRecv  int64 // messages received
	Rounds    int64 // rounds: Exchange 1; lone Send 1; lone Recv 1
}

// Sub returns a − b field by field, the cost of what happened between two
// snapshots b (earlier) and a (later).
func (a Stats) Sub(b Stats) Stats {
	return Stats{
		BytesSent: a.BytesSent - b.BytesSent,
		BytesRecv: a.BytesRecv - b.BytesRecv,
		MsgsSent:  a.MsgsSent - b.MsgsSent,
		MsgsRecv:  a.MsgsRecv - b.MsgsRecv,
		Rounds:    a.Rounds - b.Rounds,
	}
}

// Add returns a + b field by field.
func (a Stats) Add(b Stats) Stats {
	return Stats{
		BytesSent: a.BytesSent + b.BytesSent,
		BytesRecv: a.BytesRecv + b.BytesRecv,
		MsgsSent:  a.MsgsSent + b.MsgsSent,
		MsgsRecv:  a.MsgsRecv + b.MsgsRecv,
		Rounds:    a.Rounds + b.Rounds,
	}
}

// String formats the counters on one line.
func (a Stats) String() string {
	return fmt.Sprintf("sent %d B in %d msgs, received %d B in %d msgs, %d rounds",
		a.BytesSent, a.MsgsSent, a.BytesRecv, a.MsgsRecv, a.Rounds)
}

// counters is the concurrency-safe form of Stats.
type counters struct {
	bytesSent, bytesRecv, msgsSent, msgsRecv, rounds atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{
		BytesSent: c.bytesSent.Load(),
		BytesRecv: c.bytesRecv.Load(),
		MsgsSent:  c.msgsSent.Load(),
		MsgsRecv:  c.msgsRecv.Load(),
		Rounds:    c.rounds.Load(),
	}
}
