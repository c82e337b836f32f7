package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/selectformer/selectformer/selection"
)

// pairFinishTimeout bounds the wait for the peer worker's "done".
const pairFinishTimeout = 30 * time.Second

// pairHello is what the two workers of a pair announce in the clear before
// a job: public facts both derive from their coordinators' jobs, and the
// terms of their selection.ForwardRun.
type pairHello struct {
	Version    int             `json:"version"`
	Party      int             `json:"party"`
	Session    string          `json:"shard_session"`
	Phase      int             `json:"phase"`
	Shard      int             `json:"shard"`
	Shards     int             `json:"shards"`
	Candidates string          `json:"candidates"`
	Arch       string          `json:"arch"`
	ViewHash   string          `json:"view_hash"`
	Epoch      uint64          `json:"epoch"`
	Resume     json.RawMessage `json:"resume"`
}

// comparePairHello returns the first mismatch of two pair hellos.
func comparePairHello(l, p pairHello) error {
	checks := []struct {
		field   string
		l, p    any
		differs bool
	}{
		{"version", l.Version, p.Version, l.Version != p.Version},
		{"party", l.Party, p.Party, l.Party == p.Party},
		{"shard_session", l.Session, p.Session, l.Session != p.Session},
		{"phase", l.Phase + 1, p.Phase + 1, l.Phase != p.Phase},
		{"shard", l.Shard, p.Shard, l.Shard != p.Shard},
		{"shards", l.Shards, p.Shards, l.Shards != p.Shards},
		{"candidates", l.Candidates, p.Candidates, l.Candidates != p.Candidates},
		{"arch", l.Arch, p.Arch, l.Arch != p.Arch},
		{"view_hash", l.ViewHash, p.ViewHash, l.ViewHash != p.ViewHash},
	}
	for _, c := range checks {
		if !c.differs {
			continue
		}
		if ls, ok := c.l.(string); ok {
			return selection.HashMismatch(c.field, ls, c.p.(string))
		}
		return &selection.MismatchError{Field: c.field, Local: fmt.Sprint(c.l), Peer: fmt.Sprint(c.p)}
	}
	return nil
}

// pairHooks are the worker's side of job's selection.ForwardRun: the pair
// hello, the relay of the agreed epoch to the coordinator (Job.Reached)
// and the pair's "done".
func (w *Worker) pairHooks(job *Job) selection.ForwardHooks {
	return selection.ForwardHooks{
		Hello: func(ctx context.Context, mine selection.ForwardTerms, maxBytes int, exchange selection.Exchange) (selection.ForwardTerms, error) {
			epoch := mine.Epoch
			if w.forgeEpoch != nil {
				epoch = w.forgeEpoch(epoch)
			}
			l := pairHello{Version: selection.ProtocolVersion, Party: w.Party, Session: mine.SessionHash, Phase: job.Phase, Shard: job.Shard,
				Shards: job.Shards, Candidates: job.candidatesHash(), Arch: job.archHash(), ViewHash: mine.ViewHash, Epoch: epoch,
				Resume: mine.Resume}
			var p pairHello
			if err := exchange(ctx, l, &p, maxBytes); err != nil {
				if p.Version != 0 { // the peer's hello arrived: a mismatch explains its leaving
					if merr := comparePairHello(l, p); merr != nil {
						return selection.ForwardTerms{}, merr
					}
				}
				return selection.ForwardTerms{}, fmt.Errorf("shard: worker: pair handshake: %w", err)
			}
			if err := comparePairHello(l, p); err != nil {
				return selection.ForwardTerms{}, err
			}
			return selection.ForwardTerms{SessionHash: p.Session, ViewHash: p.ViewHash, Epoch: p.Epoch, Resume: p.Resume}, nil
		},
		Reached: job.Reached,
		// Both workers say they are done before either closes the pair
		// connection, so that neither takes the other's closing for a
		// failure (and retries a finished job). The exchange runs even
		// when the connection's watchers have cancelled (what the peer sent
		// before it closed is still delivered), within pairFinishTimeout.
		Finish: func(ctx context.Context, exchange selection.Exchange) error {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pairFinishTimeout)
			defer cancel()
			var peerDone string
			if err := exchange(ctx, "done", &peerDone, 16); err != nil || peerDone != "done" {
				return fmt.Errorf("shard: worker: the peer worker did not finish the shard: %v", err)
			}
			w.logf().Info("shard: worker: shard done", "party", w.Party, "phase", job.Phase+1, "shard", job.Shard, "shards", job.Shards)
			return nil
		},
	}
}
