package party

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/selection"
)

// TestFlagMismatch: a handshake mismatch is reported by each party with
// the flags that set the value on each side and both values as the flags
// take them, then what to change (issue 39: "schedule mismatch: local
// [{"proxy":{"layers":2,…" where "-schedule 2:4:8@0.5,…" would read).
func TestFlagMismatch(t *testing.T) {
	for _, tc := range []struct {
		party int
		me    selection.MismatchError
		want  string
	}{
		{0, selection.MismatchError{Field: "provider", Local: "ot", Peer: "he"},
			"handshake: -provider mismatch: this model owner has -provider ot, the data owner -provider he; both parties must pass the same -provider"},
		{1, selection.MismatchError{Field: "provider", Local: "he", Peer: "ot"},
			"handshake: -provider mismatch: this data owner has -provider he, the model owner -provider ot; "},
		{1, selection.MismatchError{Field: "seq", Local: "32", Peer: "16"},
			"handshake: -seq mismatch: this data owner has -seq 32, the model owner -public-seq 16; the model owner's -public texts are tokenized to -public-seq tokens, which must be the data owner's -seq"},
		{0, selection.MismatchError{Field: "seq", Local: "16", Peer: "32"},
			"handshake: -public-seq mismatch: this model owner has -public-seq 16, the data owner -seq 32; "},
		{0, selection.MismatchError{Field: "schedule", Local: "2:4:8@0.4,2:4:16@1", Peer: "2:4:8@0.5,2:4:16@1"},
			"this model owner has -schedule 2:4:8@0.4,2:4:16@1, the data owner -schedule 2:4:8@0.5,2:4:16@1;"},
		{1, selection.MismatchError{Field: "pool_size", Local: "120", Peer: "121"},
			"handshake: -pool mismatch: this data owner has a -pool of 120 candidates, the model owner -pool-size 121; "},
		{0, selection.MismatchError{Field: "workers", Local: "2", Peer: "8"}, "this model owner has -inflight 2, the data owner -inflight 8;"},
		{0, selection.MismatchError{Field: "batch_size", Local: "16", Peer: "64"}, "this model owner has -batch 16, the data owner -batch 64;"},
		{1, selection.MismatchError{Field: "appraisal", Local: "(none)", Peer: "mean"}, `this data owner has -appraisal "", the model owner -appraisal mean;`},
		{1, selection.MismatchError{Field: "embedding_hash", Local: "abc…", Peer: "def…", Hint: selection.EmbeddingHint},
			"handshake: -embedding mismatch: this data owner has -embedding (embeddings abc…), the model owner -model (embeddings def…); the two parties embed"},
		{0, selection.MismatchError{Field: "provider_params", Local: "0011…", Peer: "2233…"}, "this model owner has -provider he (HE parameters 0011…), the data owner -provider he (HE parameters 2233…); "},
		{0, selection.MismatchError{Field: "pool_root", Local: "ba205b08…", Peer: "0f1e2d3c…"},
			"handshake: -state mismatch: this model owner has -state (the pool root recorded in this session: ba205b08…), the data owner -pool (pool root 0f1e2d3c…); the data owner must resume with the -pool it committed to"},
		// No flag sets the protocol version: the library's words.
		{0, selection.MismatchError{Field: "version", Local: "2", Peer: "3"}, "selection: handshake: version mismatch: local 2, peer 3"},
	} {
		fm := flagMismatch(tc.party, fmt.Errorf("run: %w", &tc.me))
		if !strings.Contains(fm.Error(), tc.want) || peer.Code(Classify(fm)) != peer.ExitUsage {
			t.Errorf("%s (party %d): %q (code %d); want it to contain %q", tc.me.Field, tc.party, fm, peer.Code(Classify(fm)), tc.want)
		}
		if strings.Contains(fm.Error(), "local ") && tc.me.Field != "version" {
			t.Errorf("%s: %q keeps the library's local/peer words", tc.me.Field, fm)
		}
	}
	// Every field a binary's flag sets is mapped.
	for _, f := range selection.MismatchFields {
		if _, ok := mismatchFlags[f]; !ok && !strings.Contains("version party fixed_point.frac_bits fixed_point.int_bits view_hash shard_session phase shard candidates arch", f) {
			t.Errorf("handshake field %s names no flag", f)
		}
	}
}

// TestStopError: every stop of a party after it connected is one line
// saying where it stopped and exactly what to rerun (both parties with
// -state, and the dealer if it has exited), with the error chain kept for
// errors.As and the debug log.
func TestStopError(t *testing.T) {
	prog := NewProgress(&strings.Builder{}, false)
	prog.Step("handshake and joint coin with the data owner")
	chain := fmt.Errorf("selection: phase 2 batch 0: secure: forward layer 0: softmax: protocol: transport: read: connection reset by peer")
	lost := fmt.Errorf("%w: %w", selection.ErrConnectionLost, chain)
	live, cancelled := context.Background(), func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		s    Stop
		err  error
		code int
		want string // the whole line, or a prefix ending in "…"
	}{
		{"peer-killed-dealer", live, Stop{Command: "modelowner", State: "st-mo", Dealer: true}, lost, peer.ExitFailure,
			"stopped while handshake and joint coin with the data owner: the connection to the data owner was lost (it crashed or was killed, or the link dropped); " +
				"rerun the dealer if it has exited (a -once dealer exits once both parties are gone), then both parties with the same flags and their -state (here -state st-mo) to resume"},
		{"peer-killed-dealer-free", live, Stop{Command: "dataowner", Party: 1, State: "st-do"}, lost, peer.ExitFailure,
			"stopped while handshake and joint coin with the data owner: the connection to the model owner was lost (it crashed or was killed, or the link dropped); rerun both parties with the same flags and their -state (here -state st-do) to resume"},
		{"dealer-gone", live, Stop{Command: "modelowner", State: "st-mo", Dealer: true, DealerLost: func() bool { return true }}, chain, peer.ExitFailure,
			"stopped while handshake and joint coin with the data owner: the connection to the dealer was lost (it stopped, or the link dropped); " +
				"rerun the dealer (with the same -seeds, if it had them), then both parties with the same flags and their -state (here -state st-mo) to resume"},
		// A dealer drops the survivor's link once the peer is gone: the
		// peer's loss is the cause.
		{"peer-killed-dealer-dropped", live, Stop{Command: "modelowner", State: "st-mo", Dealer: true, DealerLost: func() bool { return true }}, lost, peer.ExitFailure,
			"stopped while handshake and joint coin with the data owner: the connection to the data owner was lost (it crashed or was killed, or the link dropped); " +
				"rerun the dealer if it has exited (a -once dealer exits once both parties are gone), then both parties with the same flags and their -state (here -state st-mo) to resume"},
		{"peer-killed-no-state", live, Stop{Command: "dataowner", Party: 1}, lost, peer.ExitFailure,
			"…no -state was given, so a rerun starts over (pass -state DIR to both parties to be able to resume)"},
		{"peer-interrupted", live, Stop{Command: "dataowner", Party: 1, State: "st-do"},
			&selection.PeerAbortError{Party: 0, Code: selection.AbortCancelled, Reason: selection.AbortCancelled.String()}, peer.ExitPeer,
			"stopped while handshake and joint coin with the data owner: the model owner ended the session: its run was cancelled or ran out of time; rerun both parties with the same flags and their -state (here -state st-do) to resume"},
		{"interrupted", cancelled, Stop{Command: "modelowner", State: "st-mo"}, chain, peer.ExitInterrupted,
			"interrupted: modelowner stopped while handshake and joint coin with the data owner; rerun both parties with the same flags and their -state (here -state st-mo) to resume"},
		{"mismatch", live, Stop{Command: "modelowner"}, &selection.MismatchError{Field: "budget", Local: "40", Peer: "41"}, peer.ExitUsage,
			"handshake: -budget mismatch: this model owner has -budget 40, the data owner -budget 41; both parties must pass the same -budget"},
		// The peer's refusal that a rerun cannot mend keeps its words.
		{"peer-state-params", live, Stop{Command: "modelowner", State: "st"},
			&selection.PeerAbortError{Party: 1, Code: selection.AbortStateParams, Reason: selection.AbortStateParams.String()}, peer.ExitPeer,
			"selection: the data owner ended the session: " + selection.AbortStateParams.String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.s.Prog = prog
			got := tc.s.Error(tc.ctx, tc.err)
			if code := peer.Code(Classify(got)); code != tc.code {
				t.Errorf("code %d, want %d", code, tc.code)
			}
			line := got.Error()
			if w, ok := strings.CutPrefix(tc.want, "…"); ok {
				if !strings.HasSuffix(line, w) {
					t.Errorf("line %q\nwant it to end in %q", line, w)
				}
			} else if line != tc.want {
				t.Errorf("line %q\nwant        %q", line, tc.want)
			}
			if strings.Contains(line, "\n") || strings.Contains(line, "transport:") {
				t.Errorf("line %q carries the error chain", line)
			}
			if !errors.Is(got, tc.err) && tc.name != "interrupted" {
				t.Errorf("the error chain is lost: %v", got)
			}
		})
	}
}
