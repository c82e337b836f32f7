package transport

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestIdentitySaveLoad(t *testing.T) {
	id, err := GenerateIdentity("model-owner")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(id.Certificate().RawSubjectPublicKeyInfo)
	if id.Fingerprint() != hex.EncodeToString(sum[:]) || len(id.Fingerprint()) != 64 {
		t.Fatalf("fingerprint %s is not the SHA-256 of the SPKI", id.Fingerprint())
	}
	dir := t.TempDir()
	cp, kp := filepath.Join(dir, "p0.crt"), filepath.Join(dir, "p0.key")
	if err := id.Save(cp, kp); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(kp); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", st.Mode(), err)
	}
	back, err := LoadIdentity(cp, kp)
	if err != nil {
		t.Fatal(err)
	}
	if back.Fingerprint() != id.Fingerprint() || back.Name() != "model-owner" {
		t.Fatal("loaded identity differs")
	}
	if fp, err := LoadFingerprint(cp); err != nil || fp != id.Fingerprint() {
		t.Fatal(fp, err)
	}

	other, err := GenerateIdentity("x")
	if err != nil {
		t.Fatal(err)
	}
	_, okey, _ := other.MarshalPEM()
	ocert, _, _ := id.MarshalPEM()
	for _, tc := range []struct {
		name       string
		cert, key  []byte
		wantSubstr string
	}{
		{"mismatched key", ocert, okey, "does not match"},
		{"no cert", []byte("junk"), okey, "CERTIFICATE"},
		{"no key", ocert, []byte("junk"), "PRIVATE KEY"},
		{"swapped", okey, ocert, "CERTIFICATE"},
	} {
		if _, err := ParseIdentity(tc.cert, tc.key); err == nil || !strings.Contains(err.Error(), tc.wantSubstr) {
			t.Errorf("%s: got %v", tc.name, err)
		}
	}
	if _, err := LoadIdentity(filepath.Join(dir, "missing"), kp); err == nil {
		t.Error("loaded a missing file")
	}
}

func TestParseFingerprint(t *testing.T) {
	id, _ := GenerateIdentity("a")
	fp := id.Fingerprint()
	colon := ""
	for i := 0; i < len(fp); i += 2 {
		if i > 0 {
			colon += ":"
		}
		colon += strings.ToUpper(fp[i : i+2])
	}
	for _, tc := range []struct {
		in string
		ok bool
	}{{fp, true}, {colon, true}, {" " + fp + "\n", true}, {fp[:62], false}, {"zz" + fp[2:], false}, {"", false}} {
		got, err := ParseFingerprint(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != fp) {
			t.Errorf("ParseFingerprint(%q) = %q, %v", tc.in, got, err)
		}
	}
}

func TestTLSDialAcceptAndPinning(t *testing.T) {
	t.Parallel() // waits out Accept deadlines, on a listener of its own
	p0, _ := GenerateIdentity("p0")
	p1, _ := GenerateIdentity("p1")
	mallory, _ := GenerateIdentity("mallory")
	ln, err := Listen("127.0.0.1:0", p0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()

	for _, tc := range []struct {
		name        string
		client      *Identity
		clientPins  string // what the client expects of the server
		serverPins  string // what the server expects of the client
		wantErrSide string // "", "client", "server"
	}{
		{"ok", p1, p0.Fingerprint(), p1.Fingerprint(), ""},
		{"client-pins-wrong-server", p1, mallory.Fingerprint(), p1.Fingerprint(), "client"},
		{"server-rejects-client", mallory, p0.Fingerprint(), p1.Fingerprint(), "server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t, 10*time.Second)
			var sc *Conn
			var serr error
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Accept skips a rejected client and waits on for the
				// pinned one: bound the wait so that it reports the reject.
				actx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				sc, serr = ln.Accept(actx, tc.serverPins)
			}()
			cc, cerr := Dial(ctx, addr, tc.client, tc.clientPins, Options{})
			wg.Wait()
			if cc != nil {
				defer cc.Close()
			}
			if sc != nil {
				defer sc.Close()
			}
			switch tc.wantErrSide {
			case "":
				if cerr != nil || serr != nil {
					t.Fatalf("client %v, server %v", cerr, serr)
				}
				if cc.PeerFingerprint() != p0.Fingerprint() || sc.PeerFingerprint() != p1.Fingerprint() {
					t.Fatal("peer fingerprints")
				}
				errc := make(chan error, 1)
				go func() { errc <- sc.Stream(9).Exchange(ctx, []uint64{1, 2}, make([]uint64, 3)) }()
				got := make([]uint64, 2)
				if err := cc.Stream(9).Exchange(ctx, []uint64{3, 4, 5}, got); err != nil || got[1] != 2 {
					t.Fatal(got, err)
				}
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
			case "client":
				var pe *PinError
				if !errors.As(cerr, &pe) || pe.Expected != mallory.Fingerprint() || pe.Got != p0.Fingerprint() {
					t.Fatalf("client error %v, want a PinError", cerr)
				}
				if !strings.Contains(cerr.Error(), mallory.Fingerprint()) || !strings.Contains(cerr.Error(), p0.Fingerprint()) {
					t.Fatalf("error does not name both fingerprints: %v", cerr)
				}
				if serr == nil {
					t.Fatal("server accepted")
				}
			case "server":
				var pe *PinError
				if !errors.As(serr, &pe) || pe.Expected != p1.Fingerprint() || pe.Got != mallory.Fingerprint() {
					t.Fatalf("server error %v, want a PinError", serr)
				}
				if !errors.Is(serr, context.DeadlineExceeded) {
					t.Fatalf("server error %v: Accept returned before its deadline", serr)
				}
				if !errors.Is(cerr, ErrKeyRejected) {
					t.Fatalf("client error %v, want ErrKeyRejected", cerr)
				}
			}
		})
	}

	// Accept honours its context.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := ln.Accept(ctx, p1.Fingerprint()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("accept without a client: %v", err)
	}
	if _, err := Dial(ctx, addr, p1, "bad", Options{}); err == nil {
		t.Fatal("dial with an invalid fingerprint")
	}
}

func TestTLSStalledPeerHonoursDeadline(t *testing.T) {
	t.Parallel() // waits out a deadline and cancelGrace (2 s), on a listener of its own
	p0, _ := GenerateIdentity("p0")
	p1, _ := GenerateIdentity("p1")
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	stall := make(chan struct{})
	defer close(stall)
	go func() { // a TLS peer that sends its preface and never reads again
		c, err := raw.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		tc := tls.Server(c, tlsConfig(p0, p1.Fingerprint(), true))
		if tc.Handshake() != nil {
			return
		}
		_, _ = tc.Write(preface{window: maxWindow, maxFrame: maxFrameLimit}.encode())
		<-stall
	}()
	ctx := testCtx(t, 10*time.Second)
	c, err := Dial(ctx, raw.Addr().String(), p1, p0.Fingerprint(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = c.Stream(1).SendWords(sctx, make([]uint64, 4<<20)) // 32 MB: more than the socket buffers
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send to a stalled TLS peer: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("send and close took %v", d)
	}
}
