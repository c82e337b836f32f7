package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/transport"
)

func TestSeedsFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "seeds")
	a0, a1, err := Seeds(path)
	if err != nil {
		t.Fatal(err)
	}
	if a0 == a1 {
		t.Fatal("equal seeds")
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("seed file %v, %v", st, err)
	}
	b0, b1, err := Seeds(path)
	if err != nil || a0 != b0 || a1 != b1 {
		t.Fatalf("reloaded seeds differ (%v)", err)
	}
	c0, _, err := Seeds("")
	if err != nil || c0 == a0 {
		t.Fatalf("fresh seeds: %v", err)
	}
	if err := os.WriteFile(path, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Seeds(path); Code(err) != ExitInput {
		t.Fatalf("malformed seed file: %v (code %d)", err, Code(err))
	}
}

func FuzzParseSeeds(f *testing.F) {
	f.Add([]byte(strings.Repeat("ab", 64) + "\n"))
	f.Add([]byte("zz"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s0, s1, err := ParseSeeds(b)
		if err == nil && fmt.Sprintf("%x%x", s0[:], s1[:]) != strings.ToLower(strings.TrimSpace(string(b))) {
			t.Fatalf("%q decoded as %x %x", b, s0, s1)
		}
	})
}

func TestCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("x"), ExitFailure},
		{Usage("bad %d", 1), ExitUsage},
		{fmt.Errorf("wrapped: %w", &transport.PinError{Expected: "a", Got: "b"}), ExitPeer},
		{WithCode(ExitInput, errors.New("x")), ExitInput},
		{WithCode(ExitInput, Usage("u")), ExitUsage},
		{fmt.Errorf("ctx: %w", &Error{Code: ExitPeer, Err: errors.New("x")}), ExitPeer},
	} {
		if got := Code(tc.err); got != tc.want {
			t.Errorf("Code(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// TestListenAddressInUse: a party (or a coordinator's -workers-listen, or
// the dealer) whose listening address is taken exits with the local
// configuration code, naming its flag, not with a peer failure (issue 39:
// a port in use exited 3, "peer failure").
func TestListenAddressInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	id, err := transport.GenerateIdentity("t")
	if err != nil {
		t.Fatal(err)
	}
	addr := taken.Addr().String()
	_, err = Establish(context.Background(), Endpoint{Listen: addr, Timeout: time.Second}, id, id.Fingerprint(), transport.Options{}, discard, nil)
	if Code(err) != ExitUsage || !strings.Contains(err.Error(), "flag -listen: ") || !strings.Contains(err.Error(), addr) {
		t.Errorf("-listen %s in use: %v (code %d)", addr, err, Code(err))
	}
	srv, err := dealer.NewServer(dealer.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := &Dealer{Server: srv}
	if err := d.Listen([2]string{"127.0.0.1:0", addr}, id, transport.Options{}); Code(err) != ExitUsage || !strings.Contains(err.Error(), "flag -listen-p1: ") {
		t.Errorf("-listen-p1 %s in use: %v (code %d)", addr, err, Code(err))
	}
	if d.Listeners[0] != nil {
		t.Error("the dealer's first listener was left open")
	}
	p := &Party{ID: id, Logger: discard}
	if _, _, err := p.ServeWorkers(context.Background(), 0, 2, addr, nil); Code(err) != ExitUsage || !strings.Contains(err.Error(), "flag -workers-listen: ") {
		t.Errorf("-workers-listen %s in use: %v (code %d)", addr, err, Code(err))
	}
}

func TestFingerprintAndLink(t *testing.T) {
	id, err := transport.GenerateIdentity("t")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	if err := id.Save(cert, key); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		code int
	}{
		{id.Fingerprint(), ExitOK},
		{strings.ToUpper(id.Fingerprint()), ExitOK},
		{cert, ExitOK},
		{"", ExitUsage},
		{"abc", ExitUsage},
		{key, ExitInput}, // a file, but not a certificate
	} {
		fp, err := Fingerprint("peer-fingerprint", tc.in)
		if Code(err) != tc.code || (err == nil && fp != id.Fingerprint()) {
			t.Errorf("Fingerprint(%q) = %q, %v; want code %d", tc.in, fp, err, tc.code)
		}
	}
	if _, err := LoadIdentity(cert, key); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadIdentity(key, cert); Code(err) != ExitInput {
		t.Fatalf("swapped identity files: %v", err)
	}
	if o, err := Link("paper-wan"); err != nil || o.Link == nil || o.Link.Latency != 50*time.Millisecond {
		t.Fatalf("Link(paper-wan) = %+v, %v", o, err)
	}
	if o, err := Link(""); err != nil || o.Link != nil {
		t.Fatalf("Link(\"\") = %+v, %v", o, err)
	}
	if _, err := Link("moon"); Code(err) != ExitUsage {
		t.Fatalf("Link(moon): %v", err)
	}
}

// TestDealerOverTLS runs the networked dealer loop with both parties over
// loopback TLS and checks that their material matches, that a wrong key is
// rejected without stopping the dealer, and that Once ends the dealer.
func TestDealerOverTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var ids [4]*transport.Identity // dealer, p0, p1, stranger
	for i := range ids {
		var err error
		if ids[i], err = transport.GenerateIdentity(fmt.Sprint("id", i)); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := dealer.NewServer(dealer.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := &Dealer{Server: srv, Fingerprints: [2]string{ids[1].Fingerprint(), ids[2].Fingerprint()}, Once: true, Log: discard}
	if err := d.Listen([2]string{"127.0.0.1:0", "127.0.0.1:0"}, ids[0], transport.Options{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	e := Endpoint{Timeout: 5 * time.Second}
	// A stranger is refused (exit code 3), and the dealer keeps going.
	if _, _, err := ConnectDealer(ctx, d.Listeners[1].Addr().String(), ids[3], ids[0].Fingerprint(), 1, transport.Options{}, e); Code(err) != ExitPeer {
		t.Fatalf("stranger: %v", err)
	}
	// A party pinning the wrong dealer key fails too.
	if _, _, err := ConnectDealer(ctx, d.Listeners[0].Addr().String(), ids[1], ids[3].Fingerprint(), 0, transport.Options{}, e); Code(err) != ExitPeer {
		t.Fatalf("wrong dealer pin: %v", err)
	}
	provs, conns := connectParties(ctx, t, d, ids[:], e, beaver.SessionID{1})
	var tr [2]beaver.Triple
	for p := range provs {
		if tr[p], err = (beaver.Typed{Provider: provs[p]}).Triples(ctx, 3, 5); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		a, b, c := tr[0].A[i]+tr[1].A[i], tr[0].B[i]+tr[1].B[i], tr[0].C[i]+tr[1].C[i]
		if a*b != c {
			t.Fatalf("triple %d: a·b ≠ c", i)
		}
	}
	waitOnceDealer(ctx, t, conns, done)
}
