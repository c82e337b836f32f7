package dealer

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/beavertest"
	"github.com/selectformer/selectformer/testharness/syncbuf"
	"github.com/selectformer/selectformer/transport"
)

// sessionWords draws beavertest.Mix (twice each) from both providers,
// checks every relation, and returns all words both parties received,
// the weight masks of party 0 included.
func sessionWords(t *testing.T, p0, p1 beaver.Provider) []uint64 {
	t.Helper()
	ctx := context.Background()
	var all []uint64
	mask := func(id uint64, k, n int) []uint64 {
		m, err := beaver.Typed{Provider: p0}.WeightMask(ctx, id, k, n)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for range 2 {
		for _, r := range beavertest.Mix {
			m, err := beavertest.DrawEach(ctx, [2]beaver.Provider{p0, p1}, r)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkRelation(r, m, mask); err != nil {
				t.Fatal(err)
			}
			all = append(all, beavertest.Words(m[0])...)
			all = append(all, beavertest.Words(m[1])...)
		}
	}
	all = append(all, mask(1, 32, 16)...)
	all = append(all, mask(2, 1, 32)...)
	all = append(all, mask(3, 64, 64)...)
	return all
}

// TestSessionsNeverShareMaterial is the regression test of the reuse
// attack: two selections against a dealer restarted with the same seeds
// (and fresh state) used to run at the same counters and receive the same
// material. Now every stream key mixes in the session id, so two sessions
// share no 64-bit word of material (expected by chance: about
// n²/2^64 ≈ 10^-10 for these n ≈ 3·10^4 words), while the same session
// id reproduces its material exactly (which is what made the old dealer
// repeat itself, and shows the comparison would catch a repeat).
func TestSessionsNeverShareMaterial(t *testing.T) {
	s0, s1 := beavertest.Seeds(20)
	x, err := beaver.NewSessionID()
	if err != nil {
		t.Fatal(err)
	}
	y, err := beaver.NewSessionID()
	if err != nil {
		t.Fatal(err)
	}
	run := func(id beaver.SessionID) []uint64 {
		// A fresh server with the same seeds: a restarted dealer.
		p0, p1, _ := startSession(t, newServer(t, s0, s1, ServerOptions{}), id)
		return sessionWords(t, p0, p1)
	}
	wx, wy, wx2 := run(x), run(y), run(x)
	if len(wx) < 20000 {
		t.Fatalf("only %d words", len(wx))
	}
	if c := beavertest.Shared(wx, wy); len(c) != 0 {
		t.Fatalf("sessions %s… and %s… share %d of %d words of material", x.Short(), y.Short(), len(c), len(wx))
	}
	if !slices.Equal(wx, wx2) {
		t.Fatal("the same session id gave different material")
	}
	t.Run("in-process", func(t *testing.T) {
		d := NewWithSeeds(s0, s1)
		a0, a1 := boundPair(t, d, x)
		b0, b1 := boundPair(t, d, y)
		ix, iy := sessionWords(t, a0, a1), sessionWords(t, b0, b1)
		if !slices.Equal(ix, wx) {
			t.Fatal("in-process and networked material of one session differ")
		}
		if c := beavertest.Shared(ix, iy); len(c) != 0 {
			t.Fatalf("in-process sessions share %d words", len(c))
		}
		// And neither is the default session's material.
		c0, _ := d.Provider(0)
		c1, _ := d.Provider(1)
		if c := beavertest.Shared(ix, sessionWords(t, c0, c1)); len(c) != 0 {
			t.Fatalf("session and default session share %d words", len(c))
		}
	})
}

// TestRestartedDealerRefusesServedPositions: a dealer restarted from its
// seeds and state file refuses every counter of a session it served before
// (a reset provider, a seek backwards), still serves the counters after
// the persisted mark (a resumed run), and serves other sessions afresh.
func TestRestartedDealerRefusesServedPositions(t *testing.T) {
	ctx := context.Background()
	s0, s1 := beavertest.Seeds(21)
	path := filepath.Join(t.TempDir(), "dealer.seeds.state")
	x := beaver.SessionID{21}
	opt := ServerOptions{StateFile: path}
	p0, p1, _ := startSession(t, newServer(t, s0, s1, opt), x)
	for range 5 {
		if _, err := beavertest.DrawEach(ctx, [2]beaver.Provider{p0, p1}, beaver.Request{Kind: beaver.KindTriple, Stream: 3, N: 4}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := beavertest.DrawEach(ctx, [2]beaver.Provider{p0, p1}, beaver.Request{Kind: beaver.KindAND, Stream: 7, N: 2}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode %v, want 0600", fi.Mode().Perm())
	}

	// The restart: same seeds, same state file, fresh providers at 0.
	q0, q1, _ := startSession(t, newServer(t, s0, s1, opt), x)
	tests := []struct {
		name   string
		stream uint32
		seek   uint64
		ok     bool
	}{
		{"re-request position 0", 3, 0, false},
		{"seek back to the last served", 3, 4, false},
		{"position reserved but not served", 3, 100, false},
		{"other stream at 0", 7, 0, false},
		{"after the persisted mark", 3, reserveChunk, true},
		{"untouched stream", 9, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := beaver.Request{Kind: beaver.KindTriple, Stream: tc.stream, N: 4}
			for _, p := range []beaver.Provider{q0, q1} {
				if p.Position(tc.stream) < tc.seek {
					if err := p.Seek(tc.stream, tc.seek); err != nil {
						t.Fatal(err)
					}
				}
			}
			m, err := beavertest.DrawEach(ctx, [2]beaver.Provider{q0, q1}, r)
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				if err := checkRelation(r, m, nil); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "reuses a counter") || !strings.Contains(err.Error(), "high-water mark") {
				t.Fatalf("served a used position again: %v", err)
			}
			// Keep both providers at the same position for the next case.
			if err := q0.Seek(tc.stream, q1.Position(tc.stream)); err != nil {
				t.Fatal(err)
			}
		})
	}
	// A new session on the restarted dealer starts at 0.
	r0, r1, _ := startSession(t, newServer(t, s0, s1, opt), beaver.SessionID{22})
	if _, err := beavertest.DrawEach(ctx, [2]beaver.Provider{r0, r1}, beaver.Request{Kind: beaver.KindTriple, Stream: 3, N: 4}); err != nil {
		t.Fatal(err)
	}
	// Without its state file the restarted dealer would serve position 0
	// again: the refusal above comes from the file.
	f0, f1, _ := startSession(t, newServer(t, s0, s1, ServerOptions{}), x)
	if _, err := beavertest.DrawEach(ctx, [2]beaver.Provider{f0, f1}, beaver.Request{Kind: beaver.KindTriple, Stream: 3, N: 4}); err != nil {
		t.Fatalf("a dealer without state refused: %v", err)
	}
}

// TestStateFileErrors: a corrupted state file, or one of other seeds, is
// refused at start (ErrBadStateFile, the file named); a session recorded
// for other keys is refused to these.
func TestStateFileErrors(t *testing.T) {
	s0, s1 := beavertest.Seeds(23)
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if _, err := NewServerWithSeeds(s0, s1, ServerOptions{StateFile: good}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	o0, o1 := beavertest.Seeds(24)
	other := filepath.Join(dir, "other")
	if _, err := NewServerWithSeeds(o0, o1, ServerOptions{StateFile: other}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{"truncated", filepath.Join(dir, "truncated"), "unexpected EOF"},
		{"garbage", filepath.Join(dir, "garbage"), "invalid character"},
		{"other seeds", other, "other seeds"},
	}
	if err := os.WriteFile(tests[0].path, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tests[1].path, []byte("\x00\x01garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewServerWithSeeds(s0, s1, ServerOptions{StateFile: tc.path})
			if !errors.Is(err, ErrBadStateFile) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrBadStateFile naming %s and %q", err, tc.path, tc.want)
			}
		})
	}
	t.Run("session of other keys", func(t *testing.T) {
		st, err := decodeDealerState(b)
		if err != nil {
			t.Fatal(err)
		}
		st.sessions[beaver.SessionID{1}] = &persisted{keys: [2]string{"aa", "bb"}, marks: map[uint32]uint64{3: reserveChunk}}
		path := filepath.Join(dir, "keys")
		if err := st.save(path); err != nil {
			t.Fatal(err)
		}
		srv := newServer(t, s0, s1, ServerOptions{StateFile: path})
		_, _, errs := connectBoth(t, srv, [2]beaver.SessionID{{1}, {1}})
		for p, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "was served to the") {
				t.Fatalf("party %d: %v", p, err)
			}
		}
	})
}

// TestSessionMismatch: the two parties present different ids: both are
// refused (once the session timeout passes: a dealer serving many sessions
// pairs presentations by id, so it cannot refuse at once), the refusal
// names the other party's id, and neither gets material.
func TestSessionMismatch(t *testing.T) {
	s0, s1 := beavertest.Seeds(25)
	srv := newServer(t, s0, s1, ServerOptions{SessionTimeout: 300 * time.Millisecond})
	clients, _, errs := connectBoth(t, srv, [2]beaver.SessionID{{1}, {2}})
	for p, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "session mismatch") || !strings.Contains(err.Error(), beaver.SessionID{byte(2 - p)}.Short()) {
			t.Fatalf("party %d: %v; want a mismatch naming the other party's id", p, err)
		}
		if clients[p] == nil {
			t.Fatalf("party %d: no client", p)
		}
		if _, ok := clients[p].Session(); ok {
			t.Fatalf("party %d bound after a refusal", p)
		}
		if _, err := (beaver.Typed{Provider: clients[p]}).Triples(context.Background(), 1, 1); err == nil || !strings.Contains(err.Error(), "no session bound") {
			t.Fatalf("party %d drew material without a session: %v", p, err)
		}
	}
	t.Run("zero id", func(t *testing.T) {
		_, _, errs := connectBoth(t, srv, [2]beaver.SessionID{{}, {}})
		for p, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "zero session id") {
				t.Fatalf("party %d: %v", p, err)
			}
		}
	})
	t.Run("in-process", func(t *testing.T) {
		d := NewWithSeeds(s0, s1)
		var errs [2]error
		var wg sync.WaitGroup
		for p := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				prov, _ := d.Provider(p)
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				errs[p] = prov.BindSession(ctx, beaver.SessionID{byte(p + 1)})
			}()
		}
		wg.Wait()
		for p, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "session mismatch") {
				t.Fatalf("party %d: %v", p, err)
			}
		}
	})
	t.Run("other party never comes", func(t *testing.T) {
		srv := newServer(t, s0, s1, ServerOptions{SessionTimeout: 100 * time.Millisecond})
		cs, cc := transport.Pipe(transport.Options{})
		defer cs.Close()
		defer cc.Close()
		done := make(chan error, 1)
		go func() { done <- srv.Serve(context.Background(), cs, 0) }()
		c, err := Connect(context.Background(), cc, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.BindSession(context.Background(), beaver.SessionID{3}); err == nil || !strings.Contains(err.Error(), "did not present") {
			t.Fatalf("bind: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrRefused) {
			t.Fatalf("serve: %v", err)
		}
	})
}

// TestProviderBinding: the library API cannot move a provider between
// sessions.
func TestProviderBinding(t *testing.T) {
	ctx := context.Background()
	s0, s1 := beavertest.Seeds(26)
	d := NewWithSeeds(s0, s1)
	a0, a1 := boundPair(t, d, beaver.SessionID{1})
	if err := a0.BindSession(ctx, beaver.SessionID{1}); err != nil {
		t.Fatalf("binding again to the same id: %v", err)
	}
	if err := a0.BindSession(ctx, beaver.SessionID{2}); err == nil || !strings.Contains(err.Error(), "already serves") {
		t.Fatalf("rebinding to another id: %v", err)
	}
	if id, ok := a1.Session(); !ok || id != (beaver.SessionID{1}) {
		t.Fatalf("session %v %v", id, ok)
	}
	// A provider that drew default-session material cannot join a session.
	u, _ := d.Provider(0)
	if _, err := (beaver.Typed{Provider: u}).Triples(ctx, 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := u.BindSession(ctx, beaver.SessionID{3}); err == nil {
		t.Fatal("a provider of the default session was bound to another")
	}
	// Fresh providers of session 1 in the same dealer: party 1 cannot get
	// the counters party 1 already used there.
	if _, err := beavertest.DrawEach(ctx, [2]beaver.Provider{a0, a1}, beaver.Request{Kind: beaver.KindTriple, Stream: 4, N: 2}); err != nil {
		t.Fatal(err)
	}
	_, b1 := boundPair(t, d, beaver.SessionID{1})
	if _, err := (beaver.Typed{Provider: b1}).Triples(ctx, 4, 2); err == nil || !strings.Contains(err.Error(), "reuses") {
		t.Fatalf("reused counter in a re-bound session: %v", err)
	}
	// A wrapper that embeds a Provider forwards the binding: it cannot
	// lose it (as an optional interface could) and so cannot move its
	// provider to another session either.
	w := struct{ beaver.Provider }{a0}
	if err := w.BindSession(ctx, beaver.SessionID{1}); err != nil {
		t.Fatalf("wrapper, same session: %v", err)
	}
	if err := w.BindSession(ctx, beaver.SessionID{2}); err == nil || !strings.Contains(err.Error(), "already serves") {
		t.Fatalf("wrapper moved its provider to another session: %v", err)
	}
}

// TestRoleBinding is the regression test of the role attack over a Pipe: a
// data owner on the data owner's connection that says "party 0" used to get
// the model owner's seed (and with it every weight mask B). Now the hello
// is refused with an error naming both roles, the refusal is logged, and
// the peer receives one error message and no byte of material.
func TestRoleBinding(t *testing.T) {
	s0, s1 := beavertest.Seeds(27)
	for _, tc := range []struct {
		name          string
		claim, bound  int
		fingerprints  [2]string
		wantInMessage []string
	}{
		{"data owner claims party 0", 0, 1, [2]string{}, []string{"hello claims the model owner (party 0)", "bound to the data owner (party 1)"}},
		{"model owner claims party 1", 1, 0, [2]string{}, []string{"hello claims the data owner (party 1)", "bound to the model owner (party 0)"}},
		{"key not the role's", 1, 1, [2]string{"aa", "bb"}, []string{"not the data owner (party 1)'s pinned key bb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var logs syncbuf.Buffer
			srv := newServer(t, s0, s1, ServerOptions{Fingerprints: tc.fingerprints, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			cs, cc := transport.Pipe(transport.Options{})
			defer cc.Close()
			done := make(chan error, 1)
			go func() {
				err := srv.Serve(ctx, cs, tc.bound)
				cs.Close()
				done <- err
			}()
			ctl := cc.Stream(controlID)
			// A dealer that refuses on the key alone may answer and close
			// before the hello is written: the send may then fail, and the
			// refusal is still received.
			_ = ctl.SendBytes(ctx, encodeHello(tc.claim))
			reply, err := ctl.RecvBytes(ctx, maxStatusMsg)
			if err != nil {
				t.Fatal(err)
			}
			serr := <-done
			if !errors.Is(serr, ErrRefused) {
				t.Fatalf("serve: %v", serr)
			}
			if reply[0] != statusError {
				t.Fatalf("reply status %d", reply[0])
			}
			for _, w := range tc.wantInMessage {
				if !strings.Contains(string(reply), w) || !strings.Contains(serr.Error(), w) {
					t.Fatalf("reply %q / error %v, want %q", reply, serr, w)
				}
			}
			if !strings.Contains(logs.String(), "dealer: refused") || !strings.Contains(logs.String(), tc.wantInMessage[0]) {
				t.Fatalf("refusal not logged: %q", logs.String())
			}
			// No byte of material: the session message is never read, and
			// after the one error message the connection ends.
			if err := ctl.SendBytes(ctx, encodeSession(beaver.SessionID{1}, 0)); err == nil {
				if b, err := ctl.RecvBytes(ctx, maxSeedReplyMsg); err == nil {
					t.Fatalf("received %d more bytes after the refusal", len(b))
				}
			}
			for _, seed := range []share.Seed{s0, s1, sessionSeed(s0, beaver.SessionID{1}, 0), sessionSeed(s1, beaver.SessionID{1}, 1)} {
				if bytes.Contains(reply, seed[:8]) {
					t.Fatal("the refusal carries seed bytes")
				}
			}
			if tc.claim != tc.bound {
				var re *RoleError
				if !errors.As(serr, &re) || re.Claimed != tc.claim || re.Bound != tc.bound {
					t.Fatalf("error %v, want a RoleError %d/%d", serr, tc.claim, tc.bound)
				}
			}
		})
	}
}

// TestRoleBindingOverTLS: the same over real TLS (transport.Listen/Dial
// on 127.0.0.1): the data owner, pinned by the data owner's listener,
// connects with its own key and claims party 0: Connect fails with an
// error naming both roles, and the real model owner is still served.
func TestRoleBindingOverTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var ids [3]*transport.Identity // dealer, model owner, data owner
	for i := range ids {
		var err error
		if ids[i], err = transport.GenerateIdentity("id" + string(rune('0'+i))); err != nil {
			t.Fatal(err)
		}
	}
	fps := [2]string{ids[1].Fingerprint(), ids[2].Fingerprint()}
	var logs syncbuf.Buffer
	s0, s1 := beavertest.Seeds(28)
	srv := newServer(t, s0, s1, ServerOptions{Fingerprints: fps, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	var lns [2]*transport.Listener
	serveErr := [2]chan error{make(chan error, 4), make(chan error, 4)}
	for role := range 2 {
		ln, err := transport.Listen("127.0.0.1:0", ids[0], transport.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		lns[role] = ln
		go func() {
			for {
				c, err := ln.Accept(ctx, fps[role])
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					serveErr[role] <- srv.Serve(ctx, c, role)
				}()
			}
		}()
	}
	dial := func(role, as int) *transport.Conn {
		c, err := transport.Dial(ctx, lns[role].Addr().String(), ids[1+as], ids[0].Fingerprint(), transport.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// The attack: the data owner's key on the data owner's port, hello
	// "party 0".
	c := dial(1, 1)
	if _, err := Connect(ctx, c, 0); err == nil || !strings.Contains(err.Error(), "model owner (party 0)") || !strings.Contains(err.Error(), "data owner (party 1)") {
		t.Fatalf("wrong-role hello: %v", err)
	}
	if err := <-serveErr[1]; !errors.As(err, new(*RoleError)) {
		t.Fatalf("serve: %v", err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the dealer kept the refused connection open")
	}
	if st := c.Stats(); st.BytesRecv > 1024 {
		t.Fatalf("refused peer received %d bytes", st.BytesRecv)
	}
	if !strings.Contains(logs.String(), "dealer: refused") {
		t.Fatalf("refusal not logged: %q", logs.String())
	}
	// The real parties are served.
	var clients [2]*Client
	var errs [2]error
	var wg sync.WaitGroup
	for role := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := Connect(ctx, dial(role, role), role)
			if err == nil {
				err = cl.BindSession(ctx, beaver.SessionID{28})
			}
			clients[role], errs[role] = cl, err
		}()
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Fatalf("party %d: %v", p, err)
		}
	}
	r := beaver.Request{Kind: beaver.KindWeightTriple, Stream: 1, WeightID: 4, M: 2, K: 3, N: 2}
	m, err := beavertest.DrawEach(ctx, [2]beaver.Provider{clients[0], clients[1]}, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkRelation(r, m, func(id uint64, k, n int) []uint64 {
		w, _ := beaver.Typed{Provider: clients[0]}.WeightMask(ctx, id, k, n)
		return w
	}); err != nil {
		t.Fatal(err)
	}
}

func FuzzDecodeHandshake(f *testing.F) {
	f.Add(encodeHello(0))
	f.Add(encodeHello(1))
	f.Add(encodeSession(beaver.SessionID{1, 2, 3}, 0))
	f.Add(encodeSession(beaver.SessionID{4}, 1<<40))
	f.Add(append([]byte{statusOK}, make([]byte, share.SeedSize)...))
	f.Add(append([]byte{statusError}, "no"...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if p, err := decodeHello(b); err == nil && !bytes.Equal(encodeHello(p), b) {
			t.Fatalf("hello round trip: %x", b)
		}
		if id, budget, err := decodeSession(b); err == nil && !bytes.Equal(encodeSession(id, budget), b) {
			t.Fatalf("session round trip: %x", b)
		}
		for _, n := range []int{0, share.SeedSize} {
			if p, err := decodeStatus(b, n); err == nil && len(p) != n {
				t.Fatalf("status payload of %d bytes, want %d", len(p), n)
			}
		}
	})
}

func FuzzDecodeDealerState(f *testing.F) {
	s0, s1 := beavertest.Seeds(29)
	st := &dealerState{seeds: seedsTag(s0, s1), sessions: map[beaver.SessionID]*persisted{
		{1}: {keys: [2]string{"ab", ""}, marks: map[uint32]uint64{2: reserveChunk, 16: 1 << 41}},
		{2}: {marks: map[uint32]uint64{}, last: 1700000000, budget: 1 << 40, spent: 12345},
	}, retired: map[retiredTag]struct{}{tagOf(beaver.SessionID{3}): {}, tagOf(beaver.SessionID{4}): {}}}
	b, err := st.encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"version":1,"seeds":"","sessions":[]}`))
	f.Add([]byte(`{"version":2,"seeds":"00","sessions":[],"retired":"AAAAAAAAAAE="}`))
	f.Add([]byte(`{"version":1,"seeds":"00","sessions":null}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeDealerState(b)
		if err != nil {
			if !errors.Is(err, ErrBadStateFile) {
				t.Fatalf("error %v does not wrap ErrBadStateFile", err)
			}
			return
		}
		// A decoded state re-encodes to a state that decodes the same.
		e, err := st.encode()
		if err != nil {
			t.Fatal(err)
		}
		st2, err := decodeDealerState(e)
		if err != nil {
			t.Fatal(err)
		}
		e2, _ := st2.encode()
		if !bytes.Equal(e, e2) {
			t.Fatalf("round trip: %s != %s", e, e2)
		}
	})
}
