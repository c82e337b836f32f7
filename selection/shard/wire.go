package shard

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/transport"
)

// The internal connection between a party's coordinator and its workers
// (transport's mutual TLS with the party's own key pair on both ends:
// workers dial the coordinator's Workers) carries, on StreamWorker:
//
//	worker → coordinator  "SFW2" | party u8 | shard u32 (little-endian): the worker's announcement
//	coordinator → worker  "ok"; "done" (the selection is over: the worker
//	                      exits, successfully), or a refusal in words (then
//	                      the connection closes)
//	coordinator → worker  'J' | EncodeJob(job)   a job
//	worker → coordinator  'P' | epoch u64        the pair agreed on epoch: before it draws there
//	coordinator → worker  'A'                    recorded (Job.Reached): the worker goes on, or
//	                      'N' | reason           not recorded: the worker draws nothing
//	worker → coordinator  'R' | result           its shares and figures (see Result), or
//	                      'E' | error text       the job failed (at most 4 KiB)
//	coordinator → worker  'D'                    done: the worker exits (successfully)
//
// A job's 'P' and its answer come any number of times (once per attempt)
// before its 'R' or 'E'. A 'D' may also come in place of the answer to the
// announcement (the selection ended as the worker attached): the worker
// takes it as "done". Announcements of "SFW1" (workers before epoch
// reports) are refused.
const (
	// StreamWorker is the stream of the internal connection's messages.
	StreamWorker uint32 = 1
	// workerHelloMagic starts a worker's announcement.
	workerHelloMagic = "SFW2"
	// oldWorkerHelloMagic started the announcement of a worker that does
	// not report its epochs.
	oldWorkerHelloMagic = "SFW1"
	// epochReportLen is the size of a worker's epoch report ('P').
	epochReportLen = 1 + 8
	// epochReportTimeout bounds a worker's wait for its coordinator's
	// answer to an epoch report.
	epochReportTimeout = 30 * time.Second
	// maxWorkerError bounds a worker's error message.
	maxWorkerError = 4 << 10
	// maxWorkerReply bounds the coordinator's answer to an announcement.
	maxWorkerReply = 256
)

// decodeEpochReport decodes a worker's epoch report ('P' | epoch u64) and
// checks the epoch: 1..MaxEpoch−1.
func decodeEpochReport(b []byte) (uint64, error) {
	if len(b) != epochReportLen || b[0] != 'P' {
		return 0, selection.WithAbortCode(selection.AbortProtocol, fmt.Errorf("shard: an epoch report of %d bytes", len(b)))
	}
	e := binary.LittleEndian.Uint64(b[1:])
	if e == 0 || e >= selection.MaxEpoch {
		return 0, selection.WithAbortCode(selection.AbortProtocol, fmt.Errorf("shard: an epoch report of epoch %d (1..%d)", e, selection.MaxEpoch-1))
	}
	return e, nil
}

// reportEpochs returns the relay of a job's epoch reports (Job.Reached)
// to the coordinator on st: 'P' | epoch, then the coordinator's 'A' within
// epochReportTimeout; anything else is an *epochReportError.
func reportEpochs(st *transport.Stream) func(context.Context, uint64) error {
	return func(ctx context.Context, epoch uint64) error {
		ctx, cancel := context.WithTimeout(ctx, epochReportTimeout)
		defer cancel()
		msg := binary.LittleEndian.AppendUint64([]byte{'P'}, epoch)
		if err := st.SendBytes(ctx, msg); err != nil {
			return &epochReportError{Epoch: epoch, Err: err}
		}
		ans, err := st.RecvBytes(ctx, maxWorkerReply)
		switch {
		case err != nil:
			return &epochReportError{Epoch: epoch, Err: err}
		case len(ans) == 1 && ans[0] == 'A':
			return nil
		case len(ans) > 0 && ans[0] == 'N':
			return &epochReportError{Epoch: epoch, Err: fmt.Errorf("%s", ans[1:])}
		}
		return &epochReportError{Epoch: epoch, Err: fmt.Errorf("an unreadable answer")}
	}
}

// epochReportError is a worker's error when its coordinator did not record
// an epoch it reported (Job.Reached): the worker draws nothing there, and
// does not retry the job (its coordinator is gone or cannot write).
type epochReportError struct {
	Epoch uint64
	Err   error
}

func (e *epochReportError) Error() string {
	return fmt.Sprintf("shard: worker: the coordinator did not record epoch %d before the worker would draw there: %v", e.Epoch, e.Err)
}

func (e *epochReportError) Unwrap() error { return e.Err }
