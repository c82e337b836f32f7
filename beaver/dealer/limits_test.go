package dealer

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/marks"
	"github.com/selectformer/selectformer/testharness/beavertest"
	"github.com/selectformer/selectformer/transport"
)

// The regression tests of a party exhausting the dealer (issue 24, hole 5).

// rawParty1 is rawParty with the data owner played by hand.
func rawParty1(t *testing.T, srv *Server, id beaver.SessionID) (*transport.Conn, *Client, <-chan error) {
	t.Helper()
	return rawParty(t, srv, id, 1)
}

// rawParty serves a session id of srv whose party raw is played by hand and
// whose other party connects with Connect: it returns the raw party's
// connection (hello and session done, the seed received), the other
// party's client and the raw party's Serve error, delivered when Serve
// returns.
func rawParty(t *testing.T, srv *Server, id beaver.SessionID, raw int) (*transport.Conn, *Client, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	sOther, cOther := transport.Pipe(transport.Options{})
	sRaw, cRaw := transport.Pipe(transport.Options{})
	served := make(chan error, 1)
	t.Cleanup(func() {
		cancel()
		for _, c := range []*transport.Conn{sOther, cOther, sRaw, cRaw} {
			c.Close()
		}
		wg.Wait()
	})
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = srv.Serve(ctx, sOther, 1-raw)
	}()
	go func() {
		defer wg.Done()
		served <- srv.Serve(ctx, sRaw, raw)
	}()
	var other *Client
	perr := make(chan error, 1)
	go func() {
		var err error
		if other, err = Connect(ctx, cOther, 1-raw); err == nil {
			err = other.BindSession(ctx, id)
		}
		perr <- err
	}()
	ctl := cRaw.Stream(controlID)
	send := func(b []byte) []byte {
		t.Helper()
		if err := ctl.SendBytes(ctx, b); err != nil {
			t.Fatal(err)
		}
		reply, err := ctl.RecvBytes(ctx, maxSeedReplyMsg)
		if err != nil {
			t.Fatal(err)
		}
		if reply[0] != statusOK {
			t.Fatalf("dealer refused: %q", reply[1:])
		}
		return reply
	}
	send(encodeHello(raw))
	send(encodeSession(id, 0))
	if err := <-perr; err != nil {
		t.Fatal(err)
	}
	return cRaw, other, served
}

// TestDealerServesEachPartyItsOwnWords: each party's raw requests for an
// item of a kind dealt to the other party are refused (a model owner
// cannot draw the data owner's dealer words nor the data owner the model
// owner's: each would unmask the other's share of that item), while a
// request of its own kind is served its exact dealer words.
func TestDealerServesEachPartyItsOwnWords(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s0, s1 := beavertest.Seeds(47)
	srv := newServer(t, s0, s1, ServerOptions{})
	own := [2]beaver.Request{
		{Kind: beaver.KindWeightTriple, Stream: 3, WeightID: 2, M: 2, K: 3, N: 4},
		{Kind: beaver.KindTriple, Stream: 3, N: 5},
	}
	for party := range 2 {
		t.Run(roleName(party), func(t *testing.T) {
			conn, _, _ := rawParty(t, srv, beaver.SessionID{47, byte(party)}, party)
			if err := openRaw(ctx, conn, 3, 7); err != nil {
				t.Fatal(err)
			}
			st := conn.Stream(7)
			ask := func(r beaver.Request) []byte {
				t.Helper()
				b, err := r.AppendBinary(nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := st.SendBytes(ctx, b); err != nil {
					t.Fatal(err)
				}
				status, err := st.RecvBytes(ctx, maxStatusMsg)
				if err != nil {
					t.Fatal(err)
				}
				return status
			}
			theirs := own[1-party]
			if status := ask(theirs); status[0] != statusError || !strings.Contains(string(status), "gets no dealer words") {
				t.Fatalf("%v asked by the %s: status %q, want a refusal", theirs, roleName(party), status)
			}
			mine := own[party]
			mine.Counter = 1
			if status := ask(mine); status[0] != statusOK {
				t.Fatalf("%v asked by the %s: status %q", mine, roleName(party), status)
			}
			words := make([]uint64, mine.CorrectionWords(party))
			if len(words) != [2]int{8, 5}[party] {
				t.Fatalf("%v gives the %s %d dealer words", mine, roleName(party), len(words))
			}
			if err := st.RecvWords(ctx, words); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// openRaw announces provider stream ps on transport stream tid of c.
func openRaw(ctx context.Context, c *transport.Conn, ps, tid uint32) error {
	msg := binary.LittleEndian.AppendUint32(nil, ps)
	return c.Stream(controlID).SendBytes(ctx, binary.LittleEndian.AppendUint32(msg, tid))
}

// TestOversizedRequestRefusedWithoutAllocation: a 40-byte request for a
// square pair of DefaultMaxRequestWords+1 words (within MaxItemWords) used
// to make the dealer allocate and fill 3 parts of 256 MiB and a 256 MiB
// correction; it is refused before anything is allocated for it, and so is
// a matrix triple beyond DefaultMaxRequestMACs whose parts are small.
func TestOversizedRequestRefusedWithoutAllocation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s0, s1 := beavertest.Seeds(40)
	conn, _, _ := rawParty1(t, newServer(t, s0, s1, ServerOptions{}), beaver.SessionID{40})
	if err := openRaw(ctx, conn, 3, 7); err != nil {
		t.Fatal(err)
	}
	st := conn.Stream(7)
	for _, tc := range []struct {
		name string
		r    beaver.Request
		want string
	}{
		{"words", beaver.Request{Kind: beaver.KindSquare, Stream: 3, N: DefaultMaxRequestWords + 1}, "words per part"},
		{"multiply-adds", beaver.Request{Kind: beaver.KindMatTriple, Stream: 3, Counter: 1, Batch: 1, M: 1 << 12, K: 1 << 13, N: 1 << 12}, "multiply-adds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.r.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			if err := st.SendBytes(ctx, b); err != nil {
				t.Fatal(err)
			}
			status, err := st.RecvBytes(ctx, maxStatusMsg)
			if err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
				t.Errorf("the dealer allocated %d MiB for the request", grew>>20)
			}
			if status[0] != statusError || !strings.Contains(string(status), tc.want) {
				t.Fatalf("status %q, want a refusal naming %q", status[:min(len(status), 200)], tc.want)
			}
		})
	}
}

// TestSessionBudgetExhausted: the session's budget is the smaller of the
// parties' announcements (a data owner announcing more gets no more), each
// item is charged its DealerWork, whichever party it is dealt to (a triple
// to the data owner, a cross-party AND triple to the model owner), and
// once the budget is spent every request is refused, over a reconnection
// too. The dealer used to serve any amount.
func TestSessionBudgetExhausted(t *testing.T) {
	ctx := context.Background()
	s0, s1 := beavertest.Seeds(41)
	srv := newServer(t, s0, s1, ServerOptions{})
	for i, kind := range []beaver.Kind{beaver.KindTriple, beaver.KindCrossAND} {
		t.Run(kind.String(), func(t *testing.T) {
			r := beaver.Request{Kind: kind, Stream: 3, N: 100}
			const items = 10
			budget := items * r.DealerWork()
			id := beaver.SessionID{41, byte(i)}
			clients, _, errs := connectBothWith(t, srv, [2]beaver.SessionID{id, id}, [2]ConnectOptions{{Budget: budget}, {Budget: 1 << 60}})
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			p := [2]beaver.Provider{clients[0], clients[1]}
			for i := range items {
				if _, err := beavertest.DrawEach(ctx, p, r); err != nil {
					t.Fatalf("item %d within the budget: %v", i, err)
				}
			}
			if spent, b, _ := srv.SessionWork(id); spent != budget || b != budget {
				t.Fatalf("session spent %d of %d, want %d of %d", spent, b, budget, budget)
			}
			if _, err := beavertest.DrawEach(ctx, p, beaver.Request{Kind: kind, Stream: 4, N: 1}); err == nil || !strings.Contains(err.Error(), "budget exhausted") {
				t.Fatalf("an item beyond the budget: %v", err)
			}
			// A reconnection of both parties announcing more does not refill it.
			clients, _, errs = connectBothWith(t, srv, [2]beaver.SessionID{id, id}, [2]ConnectOptions{{Budget: 1 << 60}, {Budget: 1 << 60}})
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := clients[0].Seek(5, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := beavertest.DrawEach(ctx, [2]beaver.Provider{clients[0], clients[1]}, beaver.Request{Kind: kind, Stream: 5, N: 1}); err == nil || !strings.Contains(err.Error(), "budget exhausted") {
				t.Fatalf("an item beyond the budget after a reconnection: %v", err)
			}
		})
	}
}

// TestTooManyStreamsRefused: a data owner that opens more than MaxStreams
// streams on one connection is cut off, and one that spreads them over
// connections is refused the session's stream beyond MaxStreams. The
// dealer used to take 2^16 per connection and per session.
func TestTooManyStreamsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s0, s1 := beavertest.Seeds(42)
	srv := newServer(t, s0, s1, ServerOptions{})
	t.Run("per connection", func(t *testing.T) {
		conn, _, served := rawParty1(t, srv, beaver.SessionID{42})
		for i := range DefaultMaxStreams + 1 {
			if err := openRaw(ctx, conn, uint32(i), uint32(i+1)); err != nil {
				break // the dealer may have hung up already
			}
		}
		select {
		case err := <-served:
			if err == nil || !strings.Contains(err.Error(), "streams opened") {
				t.Fatalf("serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the dealer kept a connection with %d streams", DefaultMaxStreams+1)
		}
	})
	t.Run("per session", func(t *testing.T) {
		id := beaver.SessionID{43}
		draw := func(conn *transport.Conn, from, to int) string {
			for i := from; i < to; i++ {
				tid := uint32(i - from + 1)
				if err := openRaw(ctx, conn, uint32(i), tid); err != nil {
					t.Fatal(err)
				}
				b, _ := beaver.Request{Kind: beaver.KindTriple, Stream: uint32(i), N: 1}.AppendBinary(nil)
				st := conn.Stream(tid)
				if err := st.SendBytes(ctx, b); err != nil {
					t.Fatal(err)
				}
				status, err := st.RecvBytes(ctx, maxStatusMsg)
				if err != nil {
					t.Fatal(err)
				}
				if status[0] != statusOK {
					return string(status[1:])
				}
				if err := st.RecvWords(ctx, make([]uint64, 1)); err != nil {
					t.Fatal(err)
				}
			}
			return ""
		}
		conn, _, _ := rawParty1(t, srv, id)
		if msg := draw(conn, 0, DefaultMaxStreams/2); msg != "" {
			t.Fatal(msg)
		}
		conn.Close()
		conn, _, _ = rawParty1(t, srv, id)
		msg := draw(conn, DefaultMaxStreams/2, DefaultMaxStreams+1)
		if !strings.Contains(msg, "streams in one session") {
			t.Fatalf("stream %d of the session: %q", DefaultMaxStreams, msg)
		}
	})
}

// TestTooManyConnectionsRefused: a party's connections beyond
// MaxConnsPerKey, each waiting at the hello, are refused at once; the
// dealer used to keep every one for its hello and session waits.
func TestTooManyConnectionsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s0, s1 := beavertest.Seeds(44)
	srv := newServer(t, s0, s1, ServerOptions{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i := range DefaultMaxConnsPerKey + 1 {
		cs, cc := transport.Pipe(transport.Options{})
		defer cc.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = srv.Serve(ctx, cs, 1)
			cs.Close()
		}()
		if i < DefaultMaxConnsPerKey {
			// Held: hello sent, the session never presented.
			ctl := cc.Stream(controlID)
			if err := ctl.SendBytes(ctx, encodeHello(1)); err != nil {
				t.Fatal(err)
			}
			if b, err := ctl.RecvBytes(ctx, maxStatusMsg); err != nil || b[0] != statusOK {
				t.Fatalf("connection %d: %q %v", i, b, err)
			}
			continue
		}
		_ = cc.Stream(controlID).SendBytes(ctx, encodeHello(1))
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		b, err := cc.Stream(controlID).RecvBytes(rctx, maxStatusMsg)
		rcancel()
		if err != nil || b[0] != statusError || !strings.Contains(string(b), "connections") {
			t.Fatalf("connection %d of one key: %q %v", i, b, err)
		}
		// The refusal says what to do: a sharded party needs 2 at a
		// dealer per pair, K+1 at one dealer serving every pair.
		for _, want := range []string{fmt.Sprintf("%d connections", DefaultMaxConnsPerKey), "2 at a dealer per pair", "-max-conns K+1", "K worker pairs"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("refusal %q does not say %q", b[1:], want)
			}
		}
	}
}

// TestStateWritesBatched: a thousand concurrent requests, each on a new
// stream (each needing a new high-water mark), share a few writes of the
// state file instead of rewriting and syncing it once each under the
// dealer's lock, and the marks still hold after a restart.
func TestStateWritesBatched(t *testing.T) {
	s0, s1 := beavertest.Seeds(45)
	path := filepath.Join(t.TempDir(), "dealer.seeds.state")
	const streams = 1000
	opt := ServerOptions{StateFile: path, MaxStreams: 2 * streams}
	srv := newServer(t, s0, s1, opt)
	d := srv.core
	id := beaver.SessionID{45}
	var sess [2]*coreSession
	var wg sync.WaitGroup
	for role := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if sess[role], err = d.join(context.Background(), nil, id, role, "", 0, time.Minute); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	w0 := d.writes.Load()
	start := time.Now()
	errs := make(chan error, streams)
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := d.serve(sess[1], 1, beaver.Request{Kind: beaver.KindTriple, Stream: uint32(i + 1), N: 4}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	writes, took := d.writes.Load()-w0, time.Since(start)
	t.Logf("%d new streams: %d state writes, %v", streams, writes, took)
	if writes > streams/10 {
		t.Fatalf("%d new streams took %d state writes", streams, writes)
	}
	// Restart safety: every one of those streams is refused at 0.
	d2 := newServer(t, s0, s1, opt).core
	var s2 [2]*coreSession
	for role := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s2[role], _ = d2.join(context.Background(), nil, id, role, "", 0, time.Minute)
		}()
	}
	wg.Wait()
	for i := range streams {
		if _, err := d2.serve(s2[1], 1, beaver.Request{Kind: beaver.KindTriple, Stream: uint32(i + 1), N: 4}); err == nil || !strings.Contains(err.Error(), "high-water mark") {
			t.Fatalf("stream %d after a restart: %v", i+1, err)
		}
	}
}

// TestStateFileShrinksAfterRetirement: sessions beyond MaxSessions and
// sessions older than SessionRetention are retired: the state file shrinks
// to the live sessions plus an 8-byte tag per retired id, and a retired id
// is refused, after a restart too. The file used to keep every session's
// record for ever.
func TestStateFileShrinksAfterRetirement(t *testing.T) {
	ctx := context.Background()
	s0, s1 := beavertest.Seeds(46)
	path := filepath.Join(t.TempDir(), "dealer.seeds.state")
	opt := ServerOptions{StateFile: path, MaxSessions: 4, SessionRetention: time.Hour}
	srv := newServer(t, s0, s1, opt)
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	session := func(srv *Server, i byte) error {
		return oneSession(srv, beaver.SessionID{46, i}, func(p [2]beaver.Provider) {
			for st := range uint32(2) {
				if _, err := beavertest.DrawEach(ctx, p, beaver.Request{Kind: beaver.KindTriple, Stream: st, N: 1}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	var sizes []int64
	for i := range byte(24) {
		if err := session(srv, i); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, size())
	}
	t.Logf("state file after each session: %v", sizes)
	if sizes[23] > sizes[3]+sizes[3]/2 {
		t.Fatalf("state file grew from %d bytes (4 sessions) to %d (24 sessions, 4 kept)", sizes[3], sizes[23])
	}
	for _, s := range []*Server{srv, newServer(t, s0, s1, opt)} {
		if err := session(s, 0); err == nil || !strings.Contains(err.Error(), "retired") {
			t.Fatalf("a retired session: %v", err)
		}
	}
	// Retention: an hour later, the next session retires the 4 kept.
	srv.core.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	before := size()
	if err := session(srv, 100); err != nil {
		t.Fatal(err)
	}
	if after := size(); after >= before {
		t.Fatalf("state file of %d bytes, %d after retiring the old sessions", before, after)
	}
	if err := session(srv, 23); err == nil || !strings.Contains(err.Error(), "retired") {
		t.Fatalf("a session past the retention: %v", err)
	}
}

// oneSession connects both parties to srv over pipes, binds session id,
// runs use (if the binding succeeded), closes the connections and returns
// once the dealer is done with them; it returns the binding's error.
func oneSession(srv *Server, id beaver.SessionID, use func([2]beaver.Provider)) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var served, bound sync.WaitGroup
	var p [2]beaver.Provider
	var errs [2]error
	var conns []*transport.Conn
	for party := range 2 {
		cs, cc := transport.Pipe(transport.Options{})
		conns = append(conns, cc)
		served.Add(1)
		go func() {
			defer served.Done()
			defer cs.Close()
			_ = srv.Serve(ctx, cs, party)
		}()
		bound.Add(1)
		go func() {
			defer bound.Done()
			c, err := Connect(ctx, cc, party)
			if err == nil {
				err = c.BindSession(ctx, id)
			}
			p[party], errs[party] = c, err
		}()
	}
	bound.Wait()
	err := errors.Join(errs[0], errs[1])
	if err == nil {
		use(p)
	}
	for _, c := range conns {
		c.Close()
	}
	served.Wait()
	return err
}

// TestStateWriteFailureServesNothing: with the state file's writes failing,
// no request beyond the written marks is served — neither the one that
// raised the mark nor a later one under the mark it raised in memory — and
// serving resumes once a write succeeds (the group commit keeps the
// restart safety of the per-request writes it replaces).
func TestStateWriteFailureServesNothing(t *testing.T) {
	s0, s1 := beavertest.Seeds(47)
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "dealer.seeds.state")
	d := newServer(t, s0, s1, ServerOptions{StateFile: path}).core
	id := beaver.SessionID{47}
	var sess [2]*coreSession
	var wg sync.WaitGroup
	for role := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess[role], _ = d.join(context.Background(), nil, id, role, "", 0, time.Minute)
		}()
	}
	wg.Wait()
	if sess[1] == nil {
		t.Fatal("no session")
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for c := range uint64(2) {
		if _, err := d.serve(sess[1], 1, beaver.Request{Kind: beaver.KindTriple, Stream: 3, Counter: c, N: 1}); err == nil || !strings.Contains(err.Error(), "save dealer state") {
			t.Fatalf("counter %d served without a written mark: %v", c, err)
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := d.serve(sess[1], 1, beaver.Request{Kind: beaver.KindTriple, Stream: 3, Counter: 2, N: 1}); err != nil {
		t.Fatal(err)
	}
	st, err := loadDealerState(path, d.state.seeds)
	if err != nil {
		t.Fatal(err)
	}
	if m := st.sessions[id].marks[3]; m <= 2 {
		t.Fatalf("written mark %d does not cover the counter served", m)
	}
}

// TestStateFileVersion1: a state file of the previous format (no budgets,
// last-use times or retired ids) is read: its marks still hold, and it is
// written back in the current format.
func TestStateFileVersion1(t *testing.T) {
	s0, s1 := beavertest.Seeds(48)
	path := filepath.Join(t.TempDir(), "dealer.seeds.state")
	tag := seedsTag(s0, s1)
	id := beaver.SessionID{48}
	v1 := `{"version":1,"seeds":"` + hex.EncodeToString(tag[:]) + `","sessions":[{"id":"` + id.String() + `","keys":["",""],"marks":{"3":65536}}]}`
	if err := os.WriteFile(path, []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, s0, s1, ServerOptions{StateFile: path})
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"version":2`) || !strings.Contains(string(b), `"last":`) {
		t.Fatalf("state file not rewritten in version 2: %s", b)
	}
	err = oneSession(srv, id, func(p [2]beaver.Provider) {
		if _, err := beavertest.DrawEach(context.Background(), p, beaver.Request{Kind: beaver.KindTriple, Stream: 3, N: 1}); err == nil || !strings.Contains(err.Error(), "high-water mark") {
			t.Errorf("counter 0 below a version 1 mark: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSetSessionBudget: a client announces the smaller of its
// ConnectOptions.Budget and the budget set by SetSessionBudget (0 meaning
// none), also through the marks wrapper selection puts around it (found with
// beaver.As), and the
// dealer serves the smaller of the two parties' announcements; a budget
// set after the bind changes nothing. Clients used to announce
// ConnectOptions.Budget alone.
func TestSetSessionBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s0, s1 := beavertest.Seeds(47)
	srv := newServer(t, s0, s1, ServerOptions{})
	cases := []struct {
		opt, shapes [2]uint64
		want        uint64
	}{
		{[2]uint64{0, 0}, [2]uint64{1000, 0}, 1000},
		{[2]uint64{500, 0}, [2]uint64{1000, 0}, 500},
		{[2]uint64{2000, 1 << 60}, [2]uint64{1000, 0}, 1000},
		{[2]uint64{0, 0}, [2]uint64{1000, 700}, 700},
		{[2]uint64{0, 0}, [2]uint64{0, 0}, DefaultSessionBudget},
	}
	for i, c := range cases {
		id := beaver.SessionID{47, byte(i)}
		var wg, served sync.WaitGroup
		errs := make([]error, 2)
		var conns []*transport.Conn
		for party := range 2 {
			cs, cc := transport.Pipe(transport.Options{})
			conns = append(conns, cs, cc)
			served.Add(1)
			go func() {
				defer served.Done()
				_ = srv.Serve(ctx, cs, party)
			}()
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl, err := ConnectWith(ctx, cc, party, ConnectOptions{Budget: c.opt[party]})
				if err != nil {
					errs[party] = err
					return
				}
				m, err := marks.New(cl, "", marks.Options{})
				if err != nil {
					errs[party] = err
					return
				}
				b, ok := beaver.As[beaver.SessionBudgeter](m)
				if !ok {
					errs[party] = errors.New("a marked client's SessionBudgeter is not found")
					return
				}
				b.SetSessionBudget(c.shapes[party])
				errs[party] = m.BindSession(ctx, id)
				b.SetSessionBudget(1) // too late: changes nothing
			}()
		}
		wg.Wait()
		_, got, ok := srv.SessionWork(id)
		for _, c := range conns {
			c.Close()
		}
		served.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
		}
		if !ok || got != c.want {
			t.Fatalf("case %d: session budget %d (known %v), want %d", i, got, ok, c.want)
		}
	}
}
