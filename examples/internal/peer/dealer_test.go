package peer

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/testharness/syncbuf"
	"github.com/selectformer/selectformer/transport"
)

// connectParties connects both parties (identities ids[1], ids[2]) to dealer
// d (identity ids[0]) and binds them to session sid.
func connectParties(ctx context.Context, t *testing.T, d *Dealer, ids []*transport.Identity, e Endpoint, sid beaver.SessionID) ([2]*dealer.Client, [2]*transport.Conn) {
	t.Helper()
	var provs [2]*dealer.Client
	var conns [2]*transport.Conn
	for p := range provs {
		var err error
		if provs[p], conns[p], err = ConnectDealer(ctx, d.Listeners[p].Addr().String(), ids[p+1], ids[0].Fingerprint(), p, transport.Options{}, e); err != nil {
			t.Fatalf("party %d: %v", p, err)
		}
	}
	bindBoth(t, provs, sid)
	return provs, conns
}

// waitOnceDealer closes both parties' dealer connections and waits for a
// dealer with Once to end (done is its Run's result) without error.
func waitOnceDealer(ctx context.Context, t *testing.T, conns [2]*transport.Conn, done <-chan error) {
	t.Helper()
	_ = conns[0].Close()
	_ = conns[1].Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("dealer with Once did not stop after party 1 left")
	}
}

// bindBoth binds both parties' clients to session id (concurrently: the
// dealer pairs them).
func bindBoth(t *testing.T, provs [2]*dealer.Client, id beaver.SessionID) {
	t.Helper()
	var errs [2]error
	var wg sync.WaitGroup
	for p := range provs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[p] = provs[p].BindSession(context.Background(), id)
		}()
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Fatalf("party %d: bind: %v", p, err)
		}
	}
}

// TestDealerRefusesWrongRole is the regression test of the role attack on
// the dealer binary's loop, over loopback TLS: the data owner connects to
// the data owner's port with its own key and says "party 0" (it used to
// receive the model owner's seed, expand every weight mask B and recover W
// from F = W − B). It gets an error naming both roles (exit code 3), the
// refusal is logged, it receives no byte of material, and the dealer goes
// on serving the real parties (with Once, the refused hello does not count
// as the model owner's session).
func TestDealerRefusesWrongRole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ids [3]*transport.Identity // dealer, p0, p1
	for i := range ids {
		var err error
		if ids[i], err = transport.GenerateIdentity("id" + string(rune('0'+i))); err != nil {
			t.Fatal(err)
		}
	}
	fps := [2]string{ids[1].Fingerprint(), ids[2].Fingerprint()}
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	dir := t.TempDir()
	seeds := filepath.Join(dir, "dealer.seeds")
	s0, s1, err := Seeds(seeds)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(s0, s1, seeds, dealer.ServerOptions{Fingerprints: fps, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	d := &Dealer{Server: srv, Fingerprints: fps, Once: true, Log: log}
	if err := d.Listen([2]string{"127.0.0.1:0", "127.0.0.1:0"}, ids[0], transport.Options{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	e := Endpoint{Timeout: 5 * time.Second}

	// The attack: data owner key, data owner port, hello "party 0".
	_, _, err = ConnectDealer(ctx, d.Listeners[1].Addr().String(), ids[2], ids[0].Fingerprint(), 0, transport.Options{}, e)
	if Code(err) != ExitPeer || !strings.Contains(err.Error(), "hello claims the model owner (party 0)") ||
		!strings.Contains(err.Error(), "bound to the data owner (party 1)") {
		t.Fatalf("wrong-role hello: %v", err)
	}
	// And the mirror: the model owner says "party 1" on its own port.
	_, _, err = ConnectDealer(ctx, d.Listeners[0].Addr().String(), ids[1], ids[0].Fingerprint(), 1, transport.Options{}, e)
	if Code(err) != ExitPeer || !strings.Contains(err.Error(), "hello claims the data owner (party 1)") {
		t.Fatalf("wrong-role hello: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(logs.String(), "dealer: refused") < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), "dealer: refused"); n < 2 {
		t.Fatalf("%d refusals logged: %s", n, logs.String())
	}
	if got := srv.Stats(); got.Items != 0 || got.BytesRecv != 0 {
		t.Fatalf("dealer served %+v to refused peers", got)
	}

	// The real parties are served, and the state file sits beside the
	// seeds, mode 0600.
	provs, conns := connectParties(ctx, t, d, ids[:], e, beaver.SessionID{2})
	m, err := beaver.Typed{Provider: provs[0]}.WeightMask(ctx, 1, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	wt0, err := beaver.Typed{Provider: provs[0]}.WeightTriple(ctx, 3, 1, 1, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	wt1, err := beaver.Typed{Provider: provs[1]}.WeightTriple(ctx, 3, 1, 1, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	for j := range 2 { // C0 + C1 = A·B
		if got, want := wt0.C[j]+wt1.C[j], wt1.A[0]*m[j]+wt1.A[1]*m[2+j]; got != want {
			t.Fatalf("weight triple %d: C ≠ A·B", j)
		}
	}
	fi, err := os.Stat(StateFile(seeds))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v, %v", fi, err)
	}
	waitOnceDealer(ctx, t, conns, done)
}

// TestDealerStateFile: a corrupted state file is an ExitInput error naming
// it.
func TestDealerStateFile(t *testing.T) {
	dir := t.TempDir()
	seeds := filepath.Join(dir, "dealer.seeds")
	s0, s1, err := Seeds(seeds)
	if err != nil {
		t.Fatal(err)
	}
	if StateFile("") != "" || StateFile(seeds) != seeds+".state" {
		t.Fatalf("StateFile(%q) = %q", seeds, StateFile(seeds))
	}
	if err := os.WriteFile(StateFile(seeds), []byte(`{"version":1,"se`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = NewServer(s0, s1, seeds, dealer.ServerOptions{})
	if Code(err) != ExitInput || !errors.Is(err, dealer.ErrBadStateFile) || !strings.Contains(err.Error(), StateFile(seeds)) {
		t.Fatalf("corrupted state file: %v (code %d)", err, Code(err))
	}
}

// TestOnceDealerEndsWhenBothLeave: two parties that connect to a dealer with
// Once and hang up before asking for any material (both quit on a handshake
// mismatch) end its session: Run returns, and the log names each party
// connecting and leaving by role, never by key (issue 30: the dealer kept
// running without a word).
func TestOnceDealerEndsWhenBothLeave(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ids [3]*transport.Identity // dealer, p0, p1
	for i := range ids {
		var err error
		if ids[i], err = transport.GenerateIdentity("id" + string(rune('0'+i))); err != nil {
			t.Fatal(err)
		}
	}
	fps := [2]string{ids[1].Fingerprint(), ids[2].Fingerprint()}
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	srv, err := dealer.NewServer(dealer.ServerOptions{Fingerprints: fps, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	d := &Dealer{Server: srv, Fingerprints: fps, Once: true, Log: log}
	if err := d.Listen([2]string{"127.0.0.1:0", "127.0.0.1:0"}, ids[0], transport.Options{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	e := Endpoint{Timeout: 5 * time.Second}
	var conns [2]*transport.Conn
	for p := range conns {
		if _, conns[p], err = ConnectDealer(ctx, d.Listeners[p].Addr().String(), ids[p+1], ids[0].Fingerprint(), p, transport.Options{}, e); err != nil {
			t.Fatalf("party %d: %v", p, err)
		}
	}
	// The model owner leaves first: the dealer waits for the data owner.
	_ = conns[0].Close()
	select {
	case err := <-done:
		t.Fatalf("the dealer ended (%v) while the data owner was still connected", err)
	case <-time.After(300 * time.Millisecond):
	}
	_ = conns[1].Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("a dealer with Once kept running after both parties left; log:\n%s", logs.String())
	}
	out := logs.String()
	for _, want := range []string{
		`msg="dealer: party connected" role="model owner"`, `msg="dealer: party connected" role="data owner"`,
		`role="model owner" party=0`, `msg="dealer: party left before drawing material" role="data owner"`,
		"dealer: session over, both parties gone",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	for p, fp := range fps {
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "dealer: party") && strings.Contains(line, fp) {
				t.Errorf("party %d's key in the dealer's log line %q", p, line)
			}
		}
	}
}

// TestDealerUnannouncedStreamsBounded (issue 36, item 4): the data owner,
// with its pinned key and a valid hello, opens 16 streams it never
// announces and fills each as far as the dealer's flow control lets it (2 MiB
// at most). The dealer never reads them: its heap grows by at most 16 ×
// 1.25 × dealer.DealerStreamWindow (and 2 MiB of slack), within
// Server.ConnBufferBound for the connection, and the connection stays up (the
// bound is the window, not a hang-up). Before, the dealer's connections had
// the transport's default windows: 16 MiB a stream, 16 streams grew its heap
// by 255 MiB (32 MiB here, where the party stops at 2 MiB a stream).
func TestDealerUnannouncedStreamsBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids := identities(t, 3) // dealer, model owner, data owner
	srv, err := dealer.NewServer(dealer.ServerOptions{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	d := &Dealer{Server: srv, Fingerprints: [2]string{ids[1].Fingerprint(), ids[2].Fingerprint()}, Log: discard}
	if err := d.Listen([2]string{"127.0.0.1:0", "127.0.0.1:0"}, ids[0], transport.Options{Log: discard}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	c, err := transport.Dial(ctx, d.Listeners[1].Addr().String(), ids[2], ids[0].Fingerprint(), transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := dealer.Connect(ctx, c, 1); err != nil { // the hello: the dealer now waits for a session id
		t.Fatal(err)
	}

	const streams, perStream = 16, 2 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	msg := make([]byte, 1024)
	var sent [streams]int
	for i := range sent {
		st := c.Stream(uint32(100 + i)) // never announced on the control stream
		for sent[i] < perStream {
			sctx, scancel := context.WithTimeout(ctx, 50*time.Millisecond)
			err := st.SendBytes(sctx, msg)
			scancel()
			if err != nil {
				break // no credit left: the dealer's window is full
			}
			sent[i] += len(msg)
		}
	}
	time.Sleep(100 * time.Millisecond) // the last frames reach the dealer
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	bound := int64(streams) * dealer.DealerStreamWindow * 5 / 4
	t.Logf("16 unannounced streams, %d bytes sent on each (of %d tried): the heap grew by %.2f MiB (bound %.2f MiB + 2 MiB; per connection %.1f MiB)",
		sent[0], perStream, float64(grew)/(1<<20), float64(bound)/(1<<20), float64(srv.ConnBufferBound())/(1<<20))
	if c.Err() != nil {
		t.Fatalf("the dealer dropped the connection: %v", c.Err())
	}
	for i, n := range sent {
		if n < dealer.DealerStreamWindow/2 {
			t.Fatalf("stream %d: only %d bytes sent: the attack did not fill the window", i, n)
		}
	}
	if grew > bound+2<<20 {
		t.Fatalf("16 unannounced streams grew the dealer's heap by %.1f MiB, want at most %.1f MiB + 2 MiB", float64(grew)/(1<<20), float64(bound)/(1<<20))
	}
}
