package peer

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

func TestShardFlagsCheckMode(t *testing.T) {
	cases := []struct {
		party int
		args  string
		bad   string // a substring of the usage error, or "" for none
	}{
		{0, "", ""},
		{0, "-shards 1", ""},
		{0, "-shards 2 -workers-listen :7200", ""},
		{0, "-shards 2", "needs -workers-listen"},
		{0, "-workers-listen :7200", "used with -shards 2 or more"},
		{0, "-shards -1", "-shards -1"},
		{0, "-shards 1025", "-shards 1025"},
		{0, "-coordinator x:1", "used with -worker only"},
		{0, "-shard-index 1", "used with -worker only"},
		{0, "-worker -coordinator c:1 -state s -cert a -key b", ""},
		{0, "-worker -state s", "needs -coordinator"},
		{0, "-worker -coordinator c:1 -budget 3", "-budget is not used with -worker"},
		{0, "-worker -coordinator c:1 -pool p", "-pool is not used with -worker"},
		{1, "-worker -coordinator c:1 -pool p -embedding e -seq 8", ""},
		{1, "-worker -coordinator c:1 -shards 2", "-shards is not used with -worker"},
		{1, "-worker -coordinator c:1 -out r.json", "-out is not used with -worker"},
	}
	for _, c := range cases {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var sf ShardFlags
		sf.Register(fs)
		for _, n := range []string{"state", "cert", "key", "pool", "embedding", "out", "budget"} {
			fs.String(n, "", "")
		}
		fs.Int("seq", 0, "")
		if err := fs.Parse(strings.Fields(c.args)); err != nil {
			t.Fatal(err)
		}
		err := sf.CheckMode(fs, c.party)
		var pe *Error
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("%q: %v", c.args, err)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad) || !errors.As(err, &pe) || pe.Code != ExitUsage):
			t.Errorf("%q: %v, want a usage error with %q", c.args, err, c.bad)
		}
	}
}

func TestShardIndex(t *testing.T) {
	cases := []struct {
		flag, env string
		want      int
		ok        bool
	}{
		{"3", "", 3, true},
		{"", "5", 5, true},
		{"2", "5", 2, true}, // the flag wins
		{"", "", 0, false},
		{"x", "", 0, false},
		{"-1", "", 0, false},
		{"1024", "", 0, false},
		{"", "seven", 0, false},
	}
	for _, c := range cases {
		t.Setenv(ShardIndexEnv, c.env)
		sf := ShardFlags{ShardIndex: c.flag}
		k, err := sf.Index()
		if (err == nil) != c.ok || c.ok && k != c.want {
			t.Errorf("-shard-index %q, $%s %q: %d, %v", c.flag, ShardIndexEnv, c.env, k, err)
		}
	}
}

func TestShardEndpoint(t *testing.T) {
	e := ShardEndpoint(Endpoint{Connect: "dataowner-worker-{shard}.dataowner-workers:7000"}, 3)
	if e.Connect != "dataowner-worker-3.dataowner-workers:7000" || e.Listen != "" {
		t.Errorf("%+v", e)
	}
	if e := ShardEndpoint(Endpoint{Listen: ":7000"}, 3); e.Listen != ":7000" {
		t.Errorf("%+v", e)
	}
}
