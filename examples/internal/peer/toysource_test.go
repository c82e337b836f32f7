package peer

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/testharness/toysource"
	"github.com/selectformer/selectformer/transport"
)

// writeIdentity writes id's certificate and key into dir and returns their
// paths.
func writeIdentity(t *testing.T, dir string, id *transport.Identity) (cert, key string) {
	t.Helper()
	c, k, err := id.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, id.Name()+".crt"), filepath.Join(dir, id.Name()+".key")
	if err := os.WriteFile(cert, c, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, k, 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// resolveParty registers PartyFlags for party on a fresh flag set, parses
// args and resolves them.
func resolveParty(party int, args []string) (*Party, error) {
	var f PartyFlags
	fs := flag.NewFlagSet("party", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.Register(fs, party, "peer")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return f.Resolve(io.Discard)
}

// TestProviderFlagTakesRegisteredSource: a source registered in one file
// of its own (testharness/toysource, "toy": the dealer source under
// another name) is a value -provider accepts with no other edit: it
// resolves with the dealer flags a non-dealer-free source needs, refuses
// to go without them, is listed among the choices of an unknown name, and
// both parties' Connect open it — here against a networked dealer over
// TLS, whose triples reconstruct.
func TestProviderFlagTakesRegisteredSource(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := t.TempDir()
	var ids [3]*transport.Identity // dealer, model owner, data owner
	for i := range ids {
		var err error
		if ids[i], err = transport.GenerateIdentity(fmt.Sprint("id", i)); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := dealer.NewServer(dealer.ServerOptions{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	d := &Dealer{Server: srv, Fingerprints: [2]string{ids[1].Fingerprint(), ids[2].Fingerprint()}, Once: true, Log: discard}
	if err := d.Listen([2]string{"127.0.0.1:0", "127.0.0.1:0"}, ids[0], transport.Options{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	peerLn, err := transport.Listen("127.0.0.1:0", ids[1], transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	peerAddr := peerLn.Addr().String()
	peerLn.Close() // the model owner listens there itself

	args := func(p int) []string {
		cert, key := writeIdentity(t, dir, ids[1+p])
		a := []string{"-cert", cert, "-key", key, "-peer-fingerprint", ids[2-p].Fingerprint(), "-provider", toysource.Name,
			"-dealer", d.Listeners[p].Addr().String(), "-dealer-fingerprint", ids[0].Fingerprint(), "-connect-timeout", "10s"}
		if p == 0 {
			return append(a, "-listen", peerAddr)
		}
		return append(a, "-connect", peerAddr)
	}
	// Without a dealer the toy (not dealer-free) is refused as a usage
	// error, and an unknown name lists it among the choices.
	var noDealer []string
	for a := args(1); len(a) > 0; a = a[2:] {
		if a[0] != "-dealer" && a[0] != "-dealer-fingerprint" {
			noDealer = append(noDealer, a[0], a[1])
		}
	}
	if _, err := resolveParty(1, noDealer); Code(err) != ExitUsage || !strings.Contains(err.Error(), "-dealer") {
		t.Fatalf("-provider toy without -dealer: %v", err)
	}
	if _, err := resolveParty(1, append(args(1), "-provider", "tee")); Code(err) != ExitUsage || !strings.Contains(err.Error(), `want dealer, ot, he, he-silent or toy`) {
		t.Fatalf("-provider tee: %v", err)
	}

	before := toysource.Opens.Load()
	var provs [2]beaver.Provider
	var closers [2]io.Closer
	var conns [2]*transport.Conn
	errs := make(chan error, 2)
	for p := range 2 {
		pt, err := resolveParty(p, args(p))
		if err != nil {
			t.Fatalf("party %d: %v", p, err)
		}
		if pt.Source.Name != toysource.Name {
			t.Fatalf("party %d resolved -provider to %q", p, pt.Source.Name)
		}
		go func() {
			var err error
			provs[p], closers[p], conns[p], err = pt.Connect(ctx, p, "party", io.Discard)
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := toysource.Opens.Load() - before; n != 2 {
		t.Fatalf("the toy source was opened %d times, want 2", n)
	}
	var tr [2]beaver.Triple
	for p := range 2 {
		go func() {
			err := provs[p].BindSession(ctx, beaver.SessionID{4, 2})
			if err == nil {
				tr[p], err = beaver.Typed{Provider: provs[p]}.Triples(ctx, 1, 3)
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if (tr[0].A[i]+tr[1].A[i])*(tr[0].B[i]+tr[1].B[i]) != tr[0].C[i]+tr[1].C[i] {
			t.Fatalf("triple %d does not reconstruct", i)
		}
	}
	for p := range 2 {
		conns[p].Close()
		closers[p].Close()
	}
	if err := <-done; err != nil {
		t.Fatalf("dealer: %v", err)
	}
}
