package selection

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAbortMessage(t *testing.T) {
	long := strings.Repeat("é", maxAbortReason) // 2 bytes a rune: cut mid-rune
	cases := []struct {
		name       string
		party      int
		err        error
		wantReason string
		mismatch   bool
	}{
		{"plain", 0, errors.New("proxy: tune: learning rate -1"), "proxy: tune: learning rate -1", false},
		{"mismatch", 1, &MismatchError{Field: "budget", Local: "40", Peer: "41"}, "selection: handshake: budget mismatch: local 40, peer 41", true},
		{"long", 1, errors.New(long), "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := encodeAbort(c.party, c.err)
			party, reason, mm, err := DecodeAbort(b)
			if err != nil {
				t.Fatal(err)
			}
			if party != c.party || (c.wantReason != "" && reason != c.wantReason) || (mm != nil) != c.mismatch {
				t.Fatalf("decoded %d %q %v", party, reason, mm)
			}
			if len(reason) > maxAbortReason || !utf8.ValidString(reason) {
				t.Fatalf("reason of %d bytes, valid UTF-8 %v", len(reason), utf8.ValidString(reason))
			}
			if c.mismatch && (mm.Field != "budget" || mm.Local != "40" || mm.Peer != "41") {
				t.Fatalf("mismatch %+v", mm)
			}
		})
	}
	for _, bad := range []string{`{`, `{"party":2,"reason":"x"}`, `{"party":0,"reason":"x","mismatch":{"Field":""}}`,
		`{"party":1,"reason":"` + strings.Repeat("x", maxAbortReason+1) + `"}`} {
		if _, _, _, err := DecodeAbort([]byte(bad)); err == nil {
			t.Errorf("DecodeAbort(%.40q) accepted", bad)
		}
	}
}

func FuzzDecodeAbort(f *testing.F) {
	f.Add(encodeAbort(0, errors.New("boom")))
	f.Add(encodeAbort(1, &MismatchError{Field: "pool_size", Local: "1", Peer: "2"}))
	f.Add([]byte(`{"party":1}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		party, reason, mm, err := DecodeAbort(b)
		if err != nil {
			return
		}
		if party != 0 && party != 1 || len(reason) > maxAbortReason || mm != nil && mm.Field == "" {
			t.Fatalf("accepted party %d, reason of %d bytes, mismatch %+v", party, len(reason), mm)
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
