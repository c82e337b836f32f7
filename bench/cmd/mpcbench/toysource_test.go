package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/testharness/toysource"
)

// TestProviderTakesRegisteredSource: a source registered in one file of
// its own (testharness/toysource, "toy": the dealer source under another
// name) is a value --provider accepts with no other edit: ops opens it for
// both parties and measures what the in-process dealer costs, select's
// flags make it the run's provider (with a dealer on the link: it is not
// dealer-free), and an unknown name lists it among the choices.
func TestProviderTakesRegisteredSource(t *testing.T) {
	before := toysource.Opens.Load()
	var out, errw bytes.Buffer
	if err := run(context.Background(), []string{"ops", "--tiny", "--json", "--provider", toysource.Name, "--prefetch=false", "--only", "mul,matmul_weights"}, &out, &errw); err != nil {
		t.Fatalf("%v\n%s", err, errw.String())
	}
	var res []Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res) != 2 {
		t.Fatalf("%v: %s", err, out.String())
	}
	for _, r := range res {
		// The dealer's figures (TestOpsJSON pins them for "dealer").
		if r.Provider != toysource.Name || r.Op == "matmul_weights" && (r.BytesP1 != 8*4*8+10 || r.DealerBytes != 8*4*6) {
			t.Errorf("%+v", r)
		}
	}
	if n := toysource.Opens.Load() - before; n != 4 {
		t.Errorf("the toy source was opened %d times for two ops, want 4", n)
	}

	fs := newFlagSet("select", io.Discard)
	sf := addSelectFlags(fs)
	if err := fs.Parse([]string{"--workload", "tiny", "--link", "lan", "--provider", toysource.Name}); err != nil {
		t.Fatal(err)
	}
	cfg, err := sf.config()
	if err != nil || cfg.Provider != toysource.Name || cfg.DealerLinks[0] == nil || cfg.Check() != nil {
		t.Fatalf("select --provider toy: %+v, %v", cfg, err)
	}
	err = run(context.Background(), []string{"ops", "--provider", "tee"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "want dealer, ot, he, he-silent or toy") {
		t.Fatalf("--provider tee: %v", err)
	}
}
