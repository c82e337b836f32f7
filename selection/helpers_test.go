package selection

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/sessiontest"
	"github.com/selectformer/selectformer/testharness/twoparty"
	"github.com/selectformer/selectformer/transport"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// valueEvaluator is a substitute secure forward: the data owner shares
// value(phase, idx) as its input (the model owner learns nothing), so the
// selection logic is tested exactly and fast.
type valueEvaluator struct {
	party int
	value func(phase, idx int) float64
	fp    share.FixedPoint
	// failAfter, if positive, makes Forward fail after that many calls.
	mu        sync.Mutex
	calls     int
	failAfter int
	// square, if set, makes Forward return the shared square of the value
	// (drawing square pairs and wrap pairs from the dealer).
	square bool
	// delay, if set, is slept before each batch.
	delay func(phase int, idx []int) time.Duration
	// batch, if set, sees the candidates of each real (not rehearsed)
	// batch.
	batch func(phase int, idx []int)
	// diverge, if set, makes every real (not rehearsed) batch draw one
	// more item than its rehearsal.
	diverge bool
	// sqrtScores makes the architectures say that the values are √H
	// (secure.Arch.SqrtEntropy).
	sqrtScores bool
}

func (v *valueEvaluator) Arch(phase, seq int) (secure.Arch, error) {
	return secure.Arch{SqrtEntropy: v.sqrtScores}, nil
}

func (v *valueEvaluator) Prepare(ctx context.Context, s *protocol.Session, phase int, arch secure.Arch, wb uint64) (Forwarder, error) {
	return forwardFunc(func(ctx context.Context, s *protocol.Session, idx []int) (*share.Tensor, error) {
		if v.diverge && !s.Rehearsal() {
			if _, err := s.Provider().Triples(ctx, s.StreamID(), 1); err != nil {
				return nil, err
			}
		}
		if s.Rehearsal() {
			// The scheduler learning the batch's dealer requests: no call
			// counted, no delay.
		} else {
			if v.batch != nil {
				v.batch(phase, idx)
			}
			v.mu.Lock()
			v.calls++
			fail := v.failAfter > 0 && v.calls > v.failAfter
			v.mu.Unlock()
			if fail {
				return nil, fmt.Errorf("injected failure")
			}
		}
		if v.delay != nil && !s.Rehearsal() {
			select {
			case <-time.After(v.delay(phase, idx)):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return sessiontest.ShareValues(ctx, s, v.fp, phase, idx, v.value, v.square)
	}), nil
}

type forwardFunc func(ctx context.Context, s *protocol.Session, idx []int) (*share.Tensor, error)

func (f forwardFunc) Forward(ctx context.Context, s *protocol.Session, idx []int) (*share.Tensor, error) {
	return f(ctx, s, idx)
}

// pair runs f as both parties of a twoparty.Run (a Pipe with an in-process
// dealer of the given seeds) and returns each party's error; a party that
// fails cancels the other and closes its connection.
func pair(t *testing.T, seeds [2]share.Seed, f func(ctx context.Context, party int, conn *transport.Conn, prov beaver.Provider) error) [2]error {
	t.Helper()
	r, _ := twoparty.Run(context.Background(), twoparty.Config{Seeds: seeds}, func(ctx context.Context, p *twoparty.Party) (struct{}, error) {
		return struct{}{}, f(ctx, p.ID, p.Conn, p.Provider)
	})
	return r.Err
}

// TestMain shortens lateMessageWait: a dozen tests whose failing party
// aborts before sending its hello waited out the whole second in its peer's
// handshake (the message a late read looks for is queued when the abort
// arrives, or never comes).
func TestMain(m *testing.M) {
	lateMessageWait = 100 * time.Millisecond
	os.Exit(m.Run())
}

// sessionPair runs f on two protocol sessions.
func sessionPair(t *testing.T, f func(ctx context.Context, s *protocol.Session) error) {
	t.Helper()
	sessionPairFP(t, share.DefaultFixedPoint, f)
}

// The helpers shared with selection/topk's and selection/shard's tests
// (testharness/sessiontest).
var (
	sessionPairFP      = sessiontest.PairFP
	shareFromDataOwner = sessiontest.ShareFromDataOwner
	plainTopK          = sessiontest.PlainTopK
	common             = sessiontest.Common
	randomWords        = sessiontest.RandomWords
)

// plainSchedule runs the schedule in the clear on value(phase, idx).
func plainSchedule(p Params, boot []int, value func(phase, idx int) float64) [][]int {
	p = p.WithDefaults()
	cand := candidates(p.PoolSize, boot)
	var out [][]int
	for i := range p.Schedule {
		vals := make([]float64, len(cand))
		for j, c := range cand {
			vals[j] = quantize(p.FixedPoint, value(i, c))
		}
		pos := plainTopK(vals, cand, p.keep(i))
		next := make([]int, len(pos))
		for j, q := range pos {
			next[j] = cand[q]
		}
		out = append(out, next)
		cand = next
	}
	return out
}

func quantize(fp share.FixedPoint, v float64) float64 {
	w, _ := fp.Encode(v)
	return fp.Decode(w)
}

var _ = math.Abs

// coinToss runs party's side of the coin toss.
func coinToss(ctx context.Context, st *transport.Stream, party int) (share.Seed, error) {
	if party == 0 {
		return tossCoinModelOwner(ctx, st)
	}
	return tossCoinDataOwner(ctx, st)
}

// phaseDir is the directory of party's batch files of phase in dir.
var phaseDir = BatchDir
