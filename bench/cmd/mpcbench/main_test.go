package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestOpsTiny(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"json prefetch", []string{"ops", "--tiny", "--json"}},
		{"json online dealer", []string{"ops", "--tiny", "--json", "--prefetch=false", "--only", "mul,matmul_weights"}},
		{"lan", []string{"ops", "--tiny", "--json", "--link", "lan", "--only", "mul,trunc"}},
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
				case "matmul_weights": // one direction
					if r.BytesP0 != 0 || r.BytesP1 != 8*4*8+10 || r.DealerBytes != 8*4*6 {
						t.Errorf("matmul_weights: %+v", r)
					}
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

func TestBadArgs(t *testing.T) {
	for _, args := range [][]string{{}, {"nope"}, {"ops", "--link", "moon"}, {"ops", "--only", "nope"}, {"ops", "extra"}} {
		var out, errw bytes.Buffer
		if err := run(context.Background(), args, &out, &errw); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
