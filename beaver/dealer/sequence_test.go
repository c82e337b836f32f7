package dealer

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/beavertest"
	"github.com/selectformer/selectformer/transport"
)

// sequentialOnly hides a provider's MaterialSeq: DrawSequence then draws
// one item at a time.
type sequentialOnly struct{ beaver.Provider }

// TestDrawSequenceMatchesMaterial: a sequence drawn at once gives every
// party the same items, at the same counters, as one Material call per
// item, from the in-process and from the networked dealer.
func TestDrawSequenceMatchesMaterial(t *testing.T) {
	ctx := context.Background()
	s0, s1 := beavertest.Seeds(7)
	id := beaver.SessionID{7}
	rng := rand.New(rand.NewPCG(7, 8))
	var seq []beaver.Request
	for range 60 {
		seq = append(seq, randomRequest(rng, 3))
	}
	// The reference: one Material call per item, at counters 5, 6, ...
	ref0, ref1 := boundPair(t, NewWithSeeds(s0, s1), id)
	var want [2][]beaver.Material
	for p, ref := range []beaver.Provider{ref0, ref1} {
		if err := ref.Seek(3, 5); err != nil {
			t.Fatal(err)
		}
		for _, r := range seq {
			m, err := ref.Material(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			want[p] = append(want[p], m)
		}
	}
	ip0, ip1 := boundPair(t, NewWithSeeds(s0, s1), id)
	np0, np1, _ := startSession(t, newServer(t, s0, s1, ServerOptions{}), id)
	for _, tc := range []struct {
		name  string
		provs [2]beaver.Provider
	}{
		{"in-process", [2]beaver.Provider{ip0, ip1}},
		{"networked", [2]beaver.Provider{np0, np1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for p, prov := range tc.provs {
				if _, ok := prov.(beaver.Sequencer); !ok {
					t.Fatalf("party %d: %T is not a Sequencer", p, prov)
				}
				if err := prov.Seek(3, 5); err != nil {
					t.Fatal(err)
				}
				got := 0
				err := beaver.DrawSequence(ctx, prov, seq, func(i int, m beaver.Material) error {
					if i != got {
						t.Fatalf("item %d delivered as %d", got, i)
					}
					got++
					if err := m.Check(seq[i], p); err != nil {
						return err
					}
					for j := range want[p][i].Parts {
						if !slices.Equal(m.Parts[j], want[p][i].Parts[j]) {
							t.Errorf("party %d item %d %v part %d differs", p, i, seq[i], j)
						}
					}
					return nil
				})
				if err != nil || got != len(seq) {
					t.Fatalf("party %d: %d of %d items, error %v", p, got, len(seq), err)
				}
				if pos := prov.Position(3); pos != 5+uint64(len(seq)) {
					t.Errorf("party %d: position %d after the sequence, want %d", p, pos, 5+len(seq))
				}
			}
		})
	}
}

// TestDrawSequencePipelines: the networked client sends every request of
// a sequence before it waits for a reply. The dealer here answers only
// once it holds all of them, so a client that waited for each reply in
// turn would never finish (it does, through sequentialOnly, fail by the
// deadline: the test can fail). The sequence interleaves kinds dealt to
// the other party (cross-party AND triples, expanded locally) with the n
// triples it asks for: those are still pipelined (a client that pipelined
// only a sequence of its own kinds alone waited for each reply in turn).
func TestDrawSequencePipelines(t *testing.T) {
	const n = 40
	seq := make([]beaver.Request, 0, 2*n)
	for i := range n {
		seq = append(seq, beaver.Request{Kind: beaver.KindTriple, Stream: 2, N: 1 + i%5},
			beaver.Request{Kind: beaver.KindCrossAND, Stream: 2, N: 2})
	}
	for _, tc := range []struct {
		name      string
		pipelined bool
	}{{"sequence", true}, {"one at a time", false}} {
		t.Run(tc.name, func(t *testing.T) {
			// The pipelined draw finishes in milliseconds (generous bound
			// for loaded machines); the other can never finish, so any
			// deadline does.
			limit := 20 * time.Second
			if !tc.pipelined {
				limit = time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), limit)
			defer cancel()
			cs, cc := transport.Pipe(transport.Options{})
			defer cs.Close()
			defer cc.Close()
			go gatedDealer(ctx, cs, n)
			c, err := Connect(ctx, cc, 1)
			if err == nil {
				err = c.BindSession(ctx, beaver.SessionID{1})
			}
			if err != nil {
				t.Fatal(err)
			}
			var prov beaver.Provider = c
			if !tc.pipelined {
				prov = sequentialOnly{c}
			}
			got := 0
			err = beaver.DrawSequence(ctx, prov, seq, func(int, beaver.Material) error { got++; return nil })
			if tc.pipelined && (err != nil || got != len(seq)) {
				t.Fatalf("%d of %d items, error %v", got, len(seq), err)
			}
			if !tc.pipelined && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("one at a time: error %v, want the deadline (the gated dealer never answers a lone request)", err)
			}
		})
	}
}

// gatedDealer plays a dealer for party 1 on conn that reads n requests on
// the first data stream before it answers any (with zero corrections).
func gatedDealer(ctx context.Context, conn *transport.Conn, n int) {
	ctl := conn.Stream(controlID)
	if _, err := ctl.RecvBytes(ctx, helloMsgSize); err != nil { // hello
		return
	}
	if ctl.SendBytes(ctx, []byte{statusOK}) != nil {
		return
	}
	if _, err := ctl.RecvBytes(ctx, sessionMsgSize); err != nil { // session id
		return
	}
	var seed share.Seed
	if ctl.SendBytes(ctx, append([]byte{statusOK}, seed[:]...)) != nil {
		return
	}
	b, err := ctl.RecvBytes(ctx, openMsgSize) // the data stream's opening
	if err != nil {
		return
	}
	_, tid, err := decodeOpen(b)
	if err != nil {
		return
	}
	st := conn.Stream(tid)
	var reqs []beaver.Request
	for range n {
		b, err := st.RecvBytes(ctx, beaver.RequestSize)
		if err != nil {
			return
		}
		r, err := beaver.DecodeRequest(b)
		if err != nil {
			return
		}
		reqs = append(reqs, r)
	}
	for _, r := range reqs {
		if st.SendBytes(ctx, []byte{statusOK}) != nil || st.SendWords(ctx, make([]uint64, r.CorrectionWords(1))) != nil {
			return
		}
	}
}

// TestDrawSequenceErrors: malformed sequences are refused before anything
// is drawn; a failure part-way through a networked sequence leaves its
// dealer stream refusing further requests rather than out of step.
func TestDrawSequenceErrors(t *testing.T) {
	ctx := context.Background()
	s0, s1 := beavertest.Seeds(8)
	p0, p1 := boundPair(t, NewWithSeeds(s0, s1), beaver.SessionID{8})
	tri := beaver.Request{Kind: beaver.KindTriple, Stream: 1, N: 4}
	for _, tc := range []struct {
		name string
		seq  []beaver.Request
		want string
	}{
		{"two streams", []beaver.Request{tri, {Kind: beaver.KindTriple, Stream: 2, N: 4}}, "stream 2"},
		{"counter set", []beaver.Request{{Kind: beaver.KindTriple, Stream: 1, N: 4, Counter: 3}}, "counters"},
		{"invalid", []beaver.Request{{Kind: beaver.KindTriple, Stream: 1, N: -1}}, "item 0"},
	} {
		for p, prov := range []beaver.Provider{p0, p1} {
			before := prov.Position(1)
			err := beaver.DrawSequence(ctx, prov, tc.seq, func(int, beaver.Material) error { return nil })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s, party %d: error %v, want one mentioning %q", tc.name, p, err, tc.want)
			}
			if prov.Position(1) != before {
				t.Errorf("%s, party %d: position moved", tc.name, p)
			}
		}
	}

	_, np1, _ := startSession(t, newServer(t, s0, s1, ServerOptions{}), beaver.SessionID{9})
	stop := errors.New("consumer gave up")
	seq := []beaver.Request{tri, tri, tri}
	err := beaver.DrawSequence(ctx, np1, seq, func(i int, _ beaver.Material) error {
		if i == 1 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("error %v, want the consumer's", err)
	}
	if _, err := np1.Material(ctx, tri); err == nil || !strings.Contains(err.Error(), "out of step") {
		t.Errorf("request after a failed sequence: error %v, want one saying the stream is out of step", err)
	}
	if _, err := np1.Material(ctx, beaver.Request{Kind: beaver.KindTriple, Stream: 4, N: 1}); err != nil {
		t.Errorf("another stream is unaffected: %v", err)
	}
}
