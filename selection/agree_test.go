package selection

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// describedProvider is a provider that describes itself as d (a party
// configured with another -provider than its peer).
type describedProvider struct {
	beaver.Provider
	d beaver.Description
}

func (p describedProvider) Describe() beaver.Description { return p.d }
func (p describedProvider) Unwrap() beaver.Provider      { return p.Provider }

// TestHandshakeComparesProviders: parties whose providers make the
// correlations differently (-provider ot against he, or he with other HE
// parameters) both stop in the handshake with a MismatchError naming
// "provider" (or "provider_params") and both values, before the coin: each
// sent its hello and nothing else on the control stream, so no session was
// bound and no bootstrap sent (issue 39: the mismatch surfaced only on one
// side, in the OT setup after the coin; the other learnt "its run
// failed").
func TestHandshakeComparesProviders(t *testing.T) {
	for _, tc := range []struct {
		name        string
		d           [2]beaver.Description
		field       string
		local, peer [2]string // by party
	}{
		{"ot-he", [2]beaver.Description{{Source: "ot"}, {Source: "he"}}, "provider", [2]string{"ot", "he"}, [2]string{"he", "ot"}},
		{"dealer-ot", [2]beaver.Description{{Source: "dealer"}, {Source: "ot"}}, "provider", [2]string{"dealer", "ot"}, [2]string{"ot", "dealer"}},
		{"he-params", [2]beaver.Description{{Source: "he", Params: "aaaaaaaaaaaaaaaa"}, {Source: "he", Params: "bbbbbbbbbbbbbbbb"}}, "provider_params",
			[2]string{"aaaaaaaaaaaa…", "bbbbbbbbbbbb…"}, [2]string{"bbbbbbbbbbbb…", "aaaaaaaaaaaa…"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testParams()
			var ctrl [2]transport.Stats
			errs := pairNoClose(t, 30*time.Second, func(ctx context.Context, party int, conn *transport.Conn, prov beaver.Provider) error {
				defer func() { ctrl[party] = conn.Stream(StreamControl).Stats() }()
				prov = describedProvider{prov, tc.d[party]}
				ev := &valueEvaluator{party: party, value: testValue, fp: share.DefaultFixedPoint}
				if party == 0 {
					_, err := (&ModelOwner{Params: p, Evaluator: ev, EmbeddingHash: "emb", Logger: quiet()}).Run(ctx, conn, prov)
					return err
				}
				_, err := (&DataOwner{Params: p, Evaluator: ev, EmbeddingHash: "emb", Logger: quiet()}).Run(ctx, conn, prov)
				return err
			})
			for party, err := range errs {
				var me *MismatchError
				if !errors.As(err, &me) || me.Field != tc.field || me.Local != tc.local[party] || me.Peer != tc.peer[party] {
					t.Errorf("party %d: %v; want a %s mismatch, local %s, peer %s", party, err, tc.field, tc.local[party], tc.peer[party])
				}
				if ctrl[party].MsgsSent != 1 {
					t.Errorf("party %d sent %d control messages; want its hello only", party, ctrl[party].MsgsSent)
				}
			}
		})
	}
}

// TestConnectionLost: a peer that vanishes mid-run without a word (killed,
// its link dropped) leaves the other party with an error wrapping
// ErrConnectionLost, whatever the call that noticed it, so that a binary
// can say so in one line and tell both parties to rerun.
func TestConnectionLost(t *testing.T) {
	p := testParams()
	errs := pairNoClose(t, 30*time.Second, func(ctx context.Context, party int, conn *transport.Conn, prov beaver.Provider) error {
		ev := &valueEvaluator{party: party, value: testValue, fp: share.DefaultFixedPoint}
		if party == 0 {
			_, err := (&ModelOwner{Params: p, Evaluator: ev, EmbeddingHash: "emb", Logger: quiet()}).Run(ctx, conn, prov)
			return err
		}
		// The data owner's process dies in its second batch: its socket
		// closes, no abort is sent.
		calls := 0
		die := forwardEvaluator{ev, func() bool { calls++; return calls == 2 }, conn}
		_, err := (&DataOwner{Params: p, Evaluator: die, EmbeddingHash: "emb", Logger: quiet()}).Run(ctx, conn, prov)
		return err
	})
	if !errors.Is(errs[0], ErrConnectionLost) {
		t.Fatalf("model owner: %v; want ErrConnectionLost", errs[0])
	}
	var pa *PeerAbortError
	if errors.As(errs[0], &pa) {
		t.Fatalf("model owner: %v; the peer sent no abort", errs[0])
	}
}

// forwardEvaluator wraps an Evaluator whose forwards close conn (the
// process dies) when die says so.
type forwardEvaluator struct {
	*valueEvaluator
	die  func() bool
	conn *transport.Conn
}

func (f forwardEvaluator) Prepare(ctx context.Context, s *protocol.Session, phase int, arch secure.Arch, wb uint64) (Forwarder, error) {
	fw, err := f.valueEvaluator.Prepare(ctx, s, phase, arch, wb)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	return forwardFunc(func(ctx context.Context, s *protocol.Session, idx []int) (*share.Tensor, error) {
		mu.Lock()
		dies := !s.Rehearsal() && f.die()
		mu.Unlock()
		if dies {
			f.conn.Close()
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return fw.Forward(ctx, s, idx)
	}), nil
}
