package peer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/beaver/source"
	"github.com/selectformer/selectformer/transport"
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
		// {shard}: a worker's index in its addresses (its own dealer
		// included); a coordinator has no index.
		{0, "-worker -coordinator c:1 -dealer dealer-{shard}.dealers.ns.svc:7100 -connect do-{shard}.w:7001", ""},
		{1, "-worker -coordinator c:1 -dealer dealer-{shard}.dealers.ns.svc:7101 -listen :7001", ""},
		{0, "-shards 2 -workers-listen :7200 -dealer dealer-0.dealers.ns.svc:7100", ""},
		{0, "-shards 2 -workers-listen :7200 -dealer dealer-{shard}.dealers.ns.svc:7100", "coordinator has none: give the one dealer the coordinators use"},
		{1, "-dealer dealer-{shard}:7101", "-dealer \"dealer-{shard}:7101\""},
		{1, "-connect mo-{shard}:7000", "-connect \"mo-{shard}:7000\": {shard} is replaced by a worker's shard index"},
		{0, "-listen :70{shard}", "-listen \":70{shard}\""},
	}
	for _, c := range cases {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var sf ShardFlags
		sf.Register(fs)
		for _, n := range []string{"state", "cert", "key", "pool", "embedding", "out", "budget", "dealer", "listen", "connect"} {
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

func TestShardAddress(t *testing.T) {
	for _, c := range []struct {
		addr string
		k    int
		want string
	}{
		{"dealer-{shard}.dealers.selectformer-dealer.svc:7100", 7, "dealer-7.dealers.selectformer-dealer.svc:7100"},
		{"dealer-0.dealers.selectformer-dealer.svc:7100", 7, "dealer-0.dealers.selectformer-dealer.svc:7100"},
		{"h{shard}-{shard}:1", 12, "h12-12:1"},
		{"", 3, ""},
	} {
		if got := ShardAddress(c.addr, c.k); got != c.want {
			t.Errorf("ShardAddress(%q, %d) = %q, want %q", c.addr, c.k, got, c.want)
		}
	}
}

// TestWorkerPairDialsItsDealer: worker k's pairing dials the dealer at
// -dealer with {shard} replaced by k (one dealer host per worker pair)
// and its peer at -connect with {shard} replaced by k, and the pair gets
// a working dealer session. The dealer and the peer listen on 127.0.0.3
// only, which worker 3 reaches as 127.0.0.{shard}.
func TestWorkerPairDialsItsDealer(t *testing.T) {
	const k = 3
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var ids [3]*transport.Identity // dealer, model owner, data owner
	for i := range ids {
		var err error
		if ids[i], err = transport.GenerateIdentity(fmt.Sprint("id", i)); err != nil {
			t.Fatal(err)
		}
	}
	host := "127.0.0." + strconv.Itoa(k)
	probe, err := net.Listen("tcp", host+":0")
	if err != nil {
		t.Skipf("no loopback address %s here: %v", host, err)
	}
	probe.Close()
	srv, err := dealer.NewServer(dealer.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := &Dealer{Server: srv, Fingerprints: [2]string{ids[1].Fingerprint(), ids[2].Fingerprint()}, Log: discard}
	if err := d.Listen([2]string{host + ":0", host + ":0"}, ids[0], transport.Options{}); err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	defer func() { dcancel(); <-done }()
	// The data owner's worker k: its dealer session and the pair link.
	peerLn, err := transport.Listen(host+":0", ids[2], transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer peerLn.Close()
	type side struct {
		prov *dealer.Client
		conn *transport.Conn
		err  error
	}
	peerc := make(chan side, 1)
	go func() {
		var s side
		s.prov, _, s.err = ConnectDealer(ctx, d.Listeners[1].Addr().String(), ids[2], ids[0].Fingerprint(), 1, transport.Options{}, Endpoint{Timeout: 5 * time.Second})
		if s.err == nil {
			s.conn, s.err = peerLn.Accept(ctx, ids[1].Fingerprint())
		}
		peerc <- s
	}()

	_, dport, _ := net.SplitHostPort(d.Listeners[0].Addr().String())
	_, pport, _ := net.SplitHostPort(peerLn.Addr().String())
	src, _ := source.ByName(source.Default)
	p := &Party{
		Source: src,
		flags: PartyFlags{Provider: source.Default, Dealer: "127.0.0." + ShardPlaceholder + ":" + dport,
			Endpoint: Endpoint{Connect: "127.0.0." + ShardPlaceholder + ":" + pport, Timeout: 5 * time.Second}},
		ID: ids[1], PeerPin: ids[2].Fingerprint(), DealerPin: ids[0].Fingerprint(), Logger: discard,
	}
	conn, prov, err := p.workerPair(0, k, io.Discard, "modelowner")(ctx, nil)
	if err != nil {
		t.Fatalf("worker %d pairing with dealer %s: %v", k, p.flags.Dealer, err)
	}
	defer conn.Close()
	other := <-peerc
	if other.err != nil {
		t.Fatal(other.err)
	}
	defer other.conn.Close()
	// The pair's dealer session works: the two parties' triples match.
	provs := [2]beaver.Provider{prov, other.prov}
	sid := beaver.SessionID{k}
	var tr [2]beaver.Triple
	errs := make(chan error, 2)
	for q := range provs {
		go func() {
			var err error
			if err = provs[q].(*dealer.Client).BindSession(ctx, sid); err == nil {
				tr[q], err = (beaver.Typed{Provider: provs[q]}).Triples(ctx, 1, 4)
			}
			errs <- err
		}()
	}
	for range provs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		if (tr[0].A[i]+tr[1].A[i])*(tr[0].B[i]+tr[1].B[i]) != tr[0].C[i]+tr[1].C[i] {
			t.Fatalf("triple %d: a·b ≠ c", i)
		}
	}
}
