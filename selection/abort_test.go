package selection

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/transport"

	"github.com/selectformer/selectformer/selection/purchase"
)

// TestAbortMessage: an abort carries the party and the public reason code
// of the error (a mismatch's field), never its text; the receiver reports
// the code's wording.
func TestAbortMessage(t *testing.T) {
	cases := []struct {
		name  string
		party int
		err   error
		code  AbortCode
		field string
		want  string // the receiver's reason
	}{
		{"plain", 0, errors.New("proxy: tune: learning rate -1"), AbortInternal, "", "its run failed"},
		{"input", 0, withCode(AbortInput, errors.New("selection: model owner: appraisal threshold 1e+300")), AbortInput, "", "refused its own inputs"},
		{"mismatch", 1, &MismatchError{Field: "budget", Local: "40", Peer: "41"}, AbortMismatch, "budget", "handshake: budget mismatch"},
		{"mismatch wrapped", 0, fmt.Errorf("x: %w", &MismatchError{Field: "schedule", Local: "[a]", Peer: "[b]"}), AbortMismatch, "schedule", "handshake: schedule mismatch"},
		{"mismatch of no public field", 0, &MismatchError{Field: "secret 42", Local: "1", Peer: "2"}, AbortMismatch, "", "handshake mismatch"},
		{"state", 1, &StateError{Path: "/home/alice/pool-state/state-p1.json", Err: errors.New("unexpected end of JSON input")}, AbortState, "", "checkpoint could not be read"},
		{"other parameters", 1, &StateError{Path: "/home/alice/s/state-p1.json", Err: errOtherParams}, AbortStateParams, "", "other parameters"},
		{"bootstrap revealed", 1, fmt.Errorf("selection: %w: it sent 24 points drawn with coin 0123456789ab", ErrBootstrapRevealed), AbortBootstrapRevealed, "", "already sent the bootstrap"},
		{"cancelled", 0, fmt.Errorf("selection: phase 1: %w", context.Canceled), AbortCancelled, "", "cancelled"},
		{"protocol", 1, withCode(AbortProtocol, errors.New("selection: decode architectures: x")), AbortProtocol, "", "broke the protocol"},
		{"limit", 1, withCode(AbortLimit, errors.New("selection: architectures message of 9999999 bytes")), AbortLimit, "", "size bound"},
		{"correlation check", 0, fmt.Errorf("selection: phase 1: ot: weighttriple w3 2×2·2×3 stream 16 #7: weight 3 (2×2·2×3): the outputs' check failed: %w", beaver.ErrCorrelationCheck), AbortCorrelation, "", "failed the check"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := encodeAbort(c.party, c.err)
			if len(b) > maxAbortMessage {
				t.Fatalf("message of %d bytes", len(b))
			}
			// Nothing of the error's text but a public field name is sent.
			var me *MismatchError
			for _, w := range strings.Fields(c.err.Error()) {
				w = strings.Trim(w, ":,")
				if len(w) >= 3 && strings.Contains(string(b), w) && w != c.field && !(errors.As(c.err, &me) && w == "mismatch") {
					t.Errorf("message %s carries %q of the error", b, w)
				}
			}
			pa, err := DecodeAbort(b)
			if err != nil {
				t.Fatal(err)
			}
			if pa.Party != c.party || pa.Code != c.code || pa.Field != c.field || !strings.Contains(pa.Reason, c.want) {
				t.Fatalf("decoded %+v, want party %d code %d field %q reason with %q", pa, c.party, c.code, c.field, c.want)
			}
		})
	}
}

// TestDecodeAbortBounds: the decoder refuses messages beyond its size bound,
// of the old free-text form, with fields it does not know, or with a field
// outside the closed list; an unknown code is kept and reported as such.
func TestDecodeAbortBounds(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     string // reason; "" = refused
	}{
		{"mismatch", `{"party":0,"code":4,"field":"pool_size"}`, "handshake: pool_size mismatch"},
		{"unknown code", `{"party":1,"code":999}`, "unknown abort code 999"},
		{"largest code", `{"party":1,"code":65535}`, "unknown abort code 65535"},
		{"code beyond 16 bits", `{"party":1,"code":65536}`, ""},
		{"negative code", `{"party":1,"code":-1}`, ""},
		{"no code", `{"party":1}`, ""},
		{"free text", `{"party":1,"code":1,"reason":"element 337: share: value 58528.088810180074"}`, ""},
		{"old form", `{"party":1,"reason":"/home/alice/state-p1.json: unexpected end"}`, ""},
		{"field outside the list", `{"party":0,"code":4,"field":"value 58528.08"}`, ""},
		{"field with another code", `{"party":0,"code":1,"field":"budget"}`, ""},
		{"party 2", `{"party":2,"code":1}`, ""},
		{"trailing data", `{"party":1,"code":1}{"party":1,"code":1}`, ""},
		{"stray bracket", `{"party":1,"code":1}]`, ""},
		{"too long", `{"party":1,"code":1}` + strings.Repeat(" ", maxAbortMessage), ""},
		{"not json", `{`, ""},
		{"null", `null`, ""},
	} {
		pa, err := DecodeAbort([]byte(c.in))
		switch {
		case c.want == "" && err == nil:
			t.Errorf("%s: accepted %+v", c.name, pa)
		case c.want != "" && (err != nil || pa.Reason != c.want):
			t.Errorf("%s: %+v, %v; want reason %q", c.name, pa, err, c.want)
		}
	}
}

// FuzzDecodeAbort: no panic, and whatever the decoder accepts is a message
// of at most maxAbortMessage bytes whose reason is the public wording of
// its code (a field only from the closed list, only with a mismatch).
func FuzzDecodeAbort(f *testing.F) {
	f.Add(encodeAbort(0, errors.New("boom")))
	f.Add(encodeAbort(1, &MismatchError{Field: "pool_size", Local: "1", Peer: "2"}))
	f.Add([]byte(`{"party":1,"code":77}`))
	f.Add([]byte(`{"party":1,"reason":"x"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		pa, err := DecodeAbort(b)
		if err != nil {
			return
		}
		if len(b) > maxAbortMessage || pa.Party != 0 && pa.Party != 1 || pa.Code == 0 ||
			pa.Field != "" && (pa.Code != AbortMismatch || !slices.Contains(MismatchFields, pa.Field)) ||
			pa.Reason != abortReason(pa.Code, pa.Field) || len(pa.Reason) > 200 {
			t.Fatalf("accepted %d bytes as %+v", len(b), pa)
		}
	})
}

func TestDecodeStateRevealed(t *testing.T) {
	seed := strings.Repeat("01", 32)
	good := func() *State {
		return &State{Version: stateVersion, Party: 1, ViewHash: "v", Epoch: 1, Seed: seed, BootstrapDone: true, Bootstrap: []int{2, 5},
			Revealed: &Revealed{ViewHash: "v", Seed: seed, Bootstrap: []int{2, 5}}}
	}
	cases := []struct {
		name string
		mod  func(s *State)
		want string // "" = valid
	}{
		{"valid", func(s *State) {}, ""},
		{"seed forgotten", func(s *State) { s.Seed, s.BootstrapDone, s.Bootstrap = "", false, nil }, ""},
		{"model owner", func(s *State) { s.Party = 0 }, "party 0"},
		{"other coin", func(s *State) { s.Seed = strings.Repeat("02", 32) }, "coin"},
		{"bad coin", func(s *State) { s.Revealed.Seed = "xyz" }, "revealed"},
		{"other params", func(s *State) { s.Revealed.ViewHash = "w" }, "other parameters"},
		{"unsorted", func(s *State) { s.Revealed.Bootstrap = []int{5, 2} }, "ascending"},
		{"other sample", func(s *State) { s.Bootstrap = []int{2, 6} }, "differs"},
		{"pool commitment", func(s *State) { s.Pool = &PoolState{Root: purchase.Root{1}, Size: 9, Seed: seed} }, ""},
		{"commitment without a root", func(s *State) { s.Pool = &PoolState{Size: 9, Seed: seed} }, "without a root"},
		{"commitment of no candidates", func(s *State) { s.Pool = &PoolState{Root: purchase.Root{1}, Seed: seed} }, "0 candidates"},
		{"commitment without its seed", func(s *State) { s.Pool = &PoolState{Root: purchase.Root{1}, Size: 9} }, "seed"},
		{"model owner with a seed", func(s *State) {
			s.Party, s.Revealed = 0, nil
			s.Pool = &PoolState{Root: purchase.Root{1}, Size: 9, Seed: seed}
		}, "seed"},
		{"tiers of other survivors", func(s *State) {
			s.Phases = []PhaseState{{Done: true, Survivors: []int{1, 4}, Tiers: []int{0}}}
		}, "tiers"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := good()
			c.mod(s)
			b, _ := json.Marshal(s)
			_, err := DecodeState(b)
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("DecodeState: %v, want %q", err, c.want)
			}
		})
	}
}

// checkPrivateModes walks dir: every file is 0600 and every directory 0700
// (checkpoints, batch shares and saved proxies are a party's secrets).
func checkPrivateModes(t *testing.T, dir string) {
	t.Helper()
	files := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		} else {
			files++
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", path, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatalf("%s: no files", dir)
	}
}

// TestAbortKeepsDetailsLocal plays the red-team cases of private details in
// abort messages, each with real parties over a pipe: what the peer
// receives on StreamAbort (the bytes) and its Run's error carry the public
// code only, never the failing party's error text (a pool value at full
// precision and its position, a local path), which stays in the failing
// party's error and log (the model owner's private -threshold, refused
// before the session, likewise). On the old code the abort carried the
// error text.
func TestAbortKeepsDetailsLocal(t *testing.T) {
	f := newSecureFixture(t)
	coins := [2][]byte{bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)}
	boot := sampleBootstrap(coinSeed(coins[0], coins[1]), f.p.PoolSize, f.p.Bootstrap)
	outside := -1 // a candidate outside the bootstrap sample
	for i := range f.p.PoolSize {
		if !slices.Contains(boot, i) {
			outside = i
			break
		}
	}
	const pixel = 98765.4321e3
	stateDir := filepath.Join(t.TempDir(), "alice-private-pool-state")
	cases := []struct {
		name    string
		failing int
		edit    func(mo *ModelOwner, do *DataOwner)
		cause   string    // in the failing party's error and log
		private []string  // never on the wire nor in the peer's error
		code    AbortCode // the peer's reason
	}{
		{"pool value out of the fixed-point range, outside the bootstrap", 1, func(mo *ModelOwner, do *DataOwner) {
			px := slices.Clone(do.Pool.Pixels)
			px[outside] = slices.Clone(px[outside])
			px[outside][100] = pixel
			do.Pool = model.Input{Pixels: px}
		}, "out of fixed-point range", []string{"fixed-point", "element", "value"}, AbortInternal},
		{"private threshold out of the fixed-point range", 0, func(mo *ModelOwner, do *DataOwner) {
			mo.Params.Appraisal, do.Params.Appraisal = AppraiseThreshold, AppraiseThreshold
			mo.Threshold = 123456.789
		}, "appraisal threshold", []string{"123456", "fixed-point"}, AbortInput},
		{"corrupt data-owner state", 1, func(mo *ModelOwner, do *DataOwner) {
			if err := os.MkdirAll(stateDir, 0o700); err != nil {
				t.Fatal(err)
			}
			do.StateDir = stateDir
			if err := os.WriteFile(StateFile(stateDir, 1), []byte(`{"version":1,"party":1,"seed":"zz"`), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "state-p1.json", []string{stateDir, "alice-private-pool-state", "state-p1.json", "JSON"}, AbortState},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mo, do := f.owners([2]string{})
			mo.coinSource, do.coinSource = bytes.NewReader(coins[0]), bytes.NewReader(coins[1])
			var logs [2]bytes.Buffer
			mo.Logger = slog.New(slog.NewTextHandler(&logs[0], nil))
			do.Logger = slog.New(slog.NewTextHandler(&logs[1], nil))
			var got [2][]byte // the abort messages as received
			mo.onAbort = func(b []byte) { got[0] = slices.Clone(b) }
			do.onAbort = func(b []byte) { got[1] = slices.Clone(b) }
			c.edit(mo, do)
			errs := pairNoClose(t, 60*time.Second, func(ctx context.Context, party int, conn *transport.Conn, prov beaver.Provider) error {
				if party == 0 {
					_, err := mo.Run(ctx, conn, prov)
					return err
				}
				_, err := do.Run(ctx, conn, prov)
				return err
			})
			own, peer := errs[c.failing], errs[1-c.failing]
			t.Logf("failing party: %v; its peer: %v; the peer received %q", own, peer, got[1-c.failing])
			if own == nil || !strings.Contains(own.Error(), c.cause) {
				t.Fatalf("party %d: %v, want an error naming %q", c.failing, own, c.cause)
			}
			// What would leak: the failing party's whole error, and each of its
			// numbers (the value at full precision, its position).
			private := append(slices.Clone(c.private), own.Error())
			private = append(private, regexp.MustCompile(`[0-9][0-9.e+-]+`).FindAllString(own.Error(), -1)...)
			for _, s := range private {
				if peer != nil && strings.Contains(peer.Error(), s) {
					t.Errorf("the peer's error %q carries %q", peer, s)
				}
				if bytes.Contains(got[1-c.failing], []byte(s)) {
					t.Errorf("the abort message %q carries %q", got[1-c.failing], s)
				}
			}
			var pa *PeerAbortError
			if !errors.As(peer, &pa) || pa.Party != c.failing || pa.Code != c.code || pa.Reason != c.code.String() {
				t.Errorf("party %d: %v, want the peer's abort with code %d", 1-c.failing, peer, c.code)
			}
			want := fmt.Sprintf(`{"party":%d,"code":%d}`, c.failing, c.code)
			if string(got[1-c.failing]) != want {
				t.Errorf("abort message %q, want %q", got[1-c.failing], want)
			}
			// The details stay in the failing party's log.
			if !strings.Contains(logs[c.failing].String(), c.cause) {
				t.Errorf("the failing party's log lacks %q:\n%s", c.cause, logs[c.failing].String())
			}
		})
	}
}
