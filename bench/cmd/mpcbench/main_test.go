package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/beaver/he"
	"github.com/selectformer/selectformer/protocol"
)

// heItemMessage is the online message of a -provider he weight triple of
// an m×k·k×n product made inside the computation: the tag word, the checked
// plan's outputs rounded up to words and the 32-byte commitment
// (beaver/ot's he_online.go).
func heItemMessage(t *testing.T, m, k, n int) int64 {
	t.Helper()
	sc, err := he.NewScheme(he.DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	plan, err := sc.PlanChecked(m, k, n)
	if err != nil {
		t.Fatal(err)
	}
	words := 1 + 4
	for _, b := range sc.OutputSizes(plan) {
		words += int((b + 7) / 8)
	}
	return protocol.MessageBytes(words)
}

func TestOpsTiny(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"json prefetch", []string{"ops", "--tiny", "--json"}},
		{"json online dealer", []string{"ops", "--tiny", "--json", "--prefetch=false", "--only", "mul,matmul_weights"}},
		{"lan", []string{"ops", "--tiny", "--json", "--link", "lan", "--only", "mul,trunc"}},
		{"ot prefetch", []string{"ops", "--tiny", "--json", "--provider", "ot", "--only", "mul,matmul_weights,trunc"}},
		{"ot online", []string{"ops", "--tiny", "--json", "--provider", "ot", "--prefetch=false", "--only", "mul,matmul_weights"}},
		{"he prefetch", []string{"ops", "--tiny", "--json", "--provider", "he", "--only", "mul,matmul_weights"}},
		{"he online", []string{"ops", "--tiny", "--json", "--provider", "he", "--prefetch=false", "--only", "matmul_weights"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errw bytes.Buffer
			if err := run(context.Background(), tc.args, &out, &errw); err != nil {
				t.Fatalf("%v\n%s", err, errw.String())
			}
			var res []Result
			if err := json.Unmarshal(out.Bytes(), &res); err != nil {
				t.Fatalf("bad JSON: %v\n%s", err, out.String())
			}
			if len(res) == 0 {
				t.Fatal("no results")
			}
			for _, r := range res {
				if r.Rounds < 1 || r.BytesP0+r.BytesP1 == 0 || r.N <= 0 || r.Shape == "" {
					t.Errorf("implausible result %+v", r)
				}
				switch r.Op {
				case "mul": // 1 round, 16 bytes per element + one frame header each
					if r.Rounds != 1 || r.BytesP0 != 16*256+10 || r.BytesP1 != 16*256+10 {
						t.Errorf("mul: %+v", r)
					}
				case "matmul_weights": // one direction: the masked operand, or with he the weight triple's outputs
					want := int64(8*4*8 + 10)
					if r.Provider == "he" {
						want = heItemMessage(t, 4, 8, 6)
					}
					if r.BytesP0 != 0 || r.BytesP1 != want || (r.Provider == "dealer" && r.DealerBytes != 8*4*6) {
						t.Errorf("matmul_weights: %+v; want %d bytes from party 1", r, want)
					}
				}
				// The online part does not depend on the provider but for
				// he's products with weights, whose triples are made inside
				// the computation (their outputs replace the masked
				// operand); the OT traffic (base OTs: 19,552 bytes per
				// party; with he also the public key and the encrypted
				// weights) replaces the dealer's and is made offline with
				// prefetch.
				free := tc.name[:2]
				if free != "ot" && free != "he" {
					free = "dealer"
				}
				if r.Provider != free || free != "dealer" && (r.DealerBytes < 2*19552 || (strings.Contains(tc.name, "prefetch") && r.OfflineSeconds <= 0)) {
					t.Errorf("provider: %+v", r)
				}
				if free == "he" && r.Op == "matmul_weights" && r.DealerBytes < 221218 {
					t.Errorf("he: no public key or encrypted weights counted: %+v", r)
				}
				if strings.Contains(tc.name, "lan") && (r.Link != "lan" || r.LinkModelSeconds <= 0) {
					t.Errorf("no link model: %+v", r)
				}
			}
		})
	}
}

func TestOpsTable(t *testing.T) {
	var out, errw bytes.Buffer
	if err := run(context.Background(), []string{"ops", "--tiny", "--only", "trunc"}, &out, &errw); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "trunc") || !strings.Contains(out.String(), "rounds") {
		t.Fatalf("table:\n%s", out.String())
	}
}

// TestHelp checks that -h, of mpcbench and of each subcommand, succeeds (so
// main exits 0) and starts with one line saying what it does.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		first string
		more  string
	}{
		{[]string{"-h"}, summary, "commands:"},
		{[]string{"--help"}, summary, "forward"},
		{[]string{"help"}, summary, "ops"},
		{[]string{"ops", "-h"}, "mpcbench ops: measure every protocol op", "-prefetch"},
		{[]string{"forward", "-h"}, "mpcbench forward: cost of the secure proxy forward", "-per-party"},
	} {
		var out, errw bytes.Buffer
		if err := run(context.Background(), tc.args, &out, &errw); err != nil {
			t.Errorf("%q: %v", tc.args, err)
		}
		first, rest, _ := strings.Cut(errw.String(), "\n")
		if !strings.HasPrefix(first, tc.first) || !strings.HasPrefix(rest, "\n") || !strings.Contains(rest, tc.more) {
			t.Errorf("%q: help\n%s", tc.args, errw.String())
		}
	}
	if !strings.HasPrefix(summary, "mpcbench ") || strings.Contains(summary, "\n") {
		t.Errorf("summary %q", summary)
	}
}

func TestBadArgs(t *testing.T) {
	for _, args := range [][]string{{}, {"nope"}, {"ops", "--link", "moon"}, {"ops", "--only", "nope"}, {"ops", "extra"}, {"ops", "--provider", "tee"}} {
		var out, errw bytes.Buffer
		if err := run(context.Background(), args, &out, &errw); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// TestMain lets forward --per-party re-execute the test binary as its child
// processes (forward-party).
func TestMain(m *testing.M) {
	if os.Getenv("MPCBENCH_TEST_CHILD") == "1" {
		main() // exits on failure
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestForwardPerParty(t *testing.T) {
	t.Setenv("MPCBENCH_TEST_CHILD", "1")
	tests := []struct {
		name string
		args []string
	}{
		{"text", []string{"--shape", "distilbert", "--heads", "1", "--mlp-dim", "4", "--seq", "4", "--batch", "2"}},
		{"vit exact", []string{"--shape", "vit-small", "--heads", "1", "--seq", "3", "--batch", "1", "--exact"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errw bytes.Buffer
			args := append([]string{"forward", "--json", "--per-party", "--timeout", "1m"}, tc.args...)
			if err := run(context.Background(), args, &out, &errw); err != nil {
				t.Fatalf("%v\n%s", err, errw.String())
			}
			var got map[string]any
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatalf("bad JSON: %v\n%s", err, out.String())
			}
			fields := []string{"peak_bytes_p0", "peak_bytes_p1", "peak_bytes_dealer", "rounds", "bytes_p0", "bytes_p1", "dealer_bytes", "peak_bytes"}
			if runtime.GOOS == "linux" {
				fields = append(fields, "rss_bytes_p0", "rss_bytes_p1", "rss_bytes_dealer")
			}
			for _, f := range fields {
				if v, ok := got[f].(float64); !ok || v <= 0 {
					t.Errorf("%s = %v, want > 0\n%s", f, got[f], out.String())
				}
			}
			// The same run in one process must cost the same rounds and bytes.
			var one bytes.Buffer
			if err := run(context.Background(), append([]string{"forward", "--json"}, tc.args...), &one, &errw); err != nil {
				t.Fatal(err)
			}
			var want map[string]any
			if err := json.Unmarshal(one.Bytes(), &want); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"rounds", "bytes_p0", "bytes_p1", "prepare_rounds", "heads", "seq"} {
				if got[f] != want[f] {
					t.Errorf("%s: per-party %v, in-process %v", f, got[f], want[f])
				}
			}
		})
	}
}

func TestForwardPartyBadArgs(t *testing.T) {
	for _, args := range [][]string{
		{"forward-party", "--role", "p2"},
		{"forward-party", "--role", "p0", "--dir", t.TempDir()},
		{"forward", "--per-party", "--batch", "0"},
		{"forward", "--shape", "nope"},
		{"forward", "--provider", "tee"},
		{"forward", "--provider", "he", "--json"},
	} {
		var out, errw bytes.Buffer
		if err := run(context.Background(), args, &out, &errw); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// TestForwardDealerFree runs forward --provider he on the tiny shape: the
// first run uploads every weight matrix once (party 0 sends them: 11, the
// one-layer proxy's folded class attention needing no key/value bias
// weight for m⊗b; 12 before), with its check (he.CheckedPlan: 8 merged as
// [B | B·V], 3 as B and B·V, so 14 encrypted weight matrices, and 7 blocks
// of projection rows, shared by the weights with the same n), the second
// sends nothing from party 0 for the weight triples, and the kinds add up
// to the provider's traffic.
func TestForwardDealerFree(t *testing.T) {
	var out, errw bytes.Buffer
	if err := run(context.Background(), []string{"forward", "--shape", "tiny", "--provider", "he"}, &out, &errw); err != nil {
		t.Fatalf("%v\n%s", err, errw.String())
	}
	s := out.String()
	for _, want := range []string{"HE: 14 encrypted weight matrices (B, B·V or [B | B·V]) and 7 of projection rows uploaded", "run 2 (later candidates: steady state)", "| weighttriple | 11 | 0 | "} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "draws overlapped") {
		t.Errorf("kinds do not add up:\n%s", s)
	}
	// The extension columns: AND triples send nothing but extension, the
	// weight triples (HE) none, and the Gilboa kinds some of each.
	rows := map[string][]string{}
	for _, line := range strings.Split(s[strings.Index(s, "run 2"):], "\n") {
		if f := strings.Split(line, " | "); len(f) == 8 {
			rows[strings.TrimPrefix(f[0], "| ")] = f
		}
	}
	for kind, want := range map[string]string{"and": "all", "weighttriple": "none", "mattriple": "some"} {
		f := rows[kind]
		if f == nil {
			t.Fatalf("no %s row in run 2:\n%s", kind, s)
		}
		for p := range 2 {
			got := "some"
			switch {
			case f[4+p] == "0":
				got = "none"
			case f[4+p] == f[2+p]:
				got = "all"
			}
			if got != want {
				t.Errorf("%s, party %d: %s bytes of which %s extension; want %s", kind, p, f[2+p], f[4+p], want)
			}
		}
	}
}
