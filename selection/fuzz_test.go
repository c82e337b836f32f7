package selection

import (
	"bytes"
	"encoding/json"
	"maps"
	"runtime"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/selection/purchase"
)

func FuzzDecodeState(f *testing.F) {
	good := &State{Version: stateVersion, Party: 1, ViewHash: "x", Epoch: 2, Seed: "0102030405060708091011121314151617181920212223242526272829303132",
		BootstrapDone: true, Bootstrap: []int{3, 5}, Phases: []PhaseState{{Batches: []BatchShares{{Batch: 0, Shares: []uint64{1, 2}}}, Done: true, Survivors: []int{1, 2}}, {}}}
	b, _ := json.Marshal(good)
	f.Add(b)
	f.Add([]byte(`{"version":1,"party":0}`))
	f.Add([]byte(`{"version":1,"party":0,"phases":[{"done":true}]}`))
	f.Add([]byte(`not json`))
	good.Revealed = &Revealed{ViewHash: "x", Seed: good.Seed, Bootstrap: []int{3, 5}}
	b, _ = json.Marshal(good)
	f.Add(b)
	good.Pool = &PoolState{Root: purchase.Root{1}, Size: 40, Seq: 50, Seed: strings.Repeat("0b", 32)}
	good.Phases[0].Tiers = []int{0, 0}
	b, _ = json.Marshal(good)
	f.Add(b)
	good.Party, good.Revealed, good.ShardFloors = 0, nil, map[string]uint64{strings.Repeat("0a", 32): 3}
	good.Pool.Seed = ""
	good.Labelled = &BootstrapLabels{Bootstrap: []int{3, 5}, Points: strings.Repeat("ab", 32), Labels: []int{1, 0}}
	b, _ = json.Marshal(good)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeState(b)
		if err != nil {
			return
		}
		// A valid state re-encodes to a valid state with the same summary.
		b2, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := DecodeState(b2)
		if err != nil {
			t.Fatalf("re-encoded state invalid: %v", err)
		}
		if a, c := s.summarize(), s2.summarize(); a.SeedHash != c.SeedHash || len(a.Phases) != len(c.Phases) {
			t.Fatal("summary changed")
		}
		if !maps.Equal(s.ShardFloors, s2.ShardFloors) {
			t.Fatal("shard floors changed")
		}
		if (s.Pool == nil) != (s2.Pool == nil) || s.Pool != nil && *s.Pool != *s2.Pool {
			t.Fatal("pool commitment changed")
		}
		if s.Pool != nil && (s.Pool.Size <= 0 || s.Party == 0 && s.Pool.Seed != "") {
			t.Fatalf("accepted a commitment %+v at party %d", s.Pool, s.Party)
		}
		for _, ph := range s.Phases {
			if len(ph.Tiers) != 0 && len(ph.Tiers) != len(ph.Survivors) {
				t.Fatalf("accepted %d tiers for %d survivors", len(ph.Tiers), len(ph.Survivors))
			}
		}
		for _, e := range s.ShardFloors {
			if e == 0 || e >= MaxEpoch {
				t.Fatalf("accepted a shard floor of epoch %d", e)
			}
		}
	})
}

func FuzzDecodeBatchFile(f *testing.F) {
	f.Add(encodeBatch(batchFile{Party: 1, Phase: 2, BatchShares: BatchShares{Batch: 7, Epoch: 3, Shares: []uint64{1, 1 << 63, 5}}}))
	f.Add(encodeBatch(batchFile{}))
	f.Add([]byte("SFB1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		party, phase, bs, err := DecodeBatchFile(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to the same bytes.
		if got := encodeBatch(batchFile{Party: party, Phase: phase, BatchShares: bs}); !bytes.Equal(got, b) {
			t.Fatalf("round trip changed the file")
		}
	})
}

func TestDecodeBatchFileErrors(t *testing.T) {
	good := encodeBatch(batchFile{Party: 1, Phase: 2, BatchShares: BatchShares{Batch: 7, Epoch: 3, Shares: []uint64{1, 2, 3}}})
	party, phase, bs, err := DecodeBatchFile(good)
	if err != nil || party != 1 || phase != 2 || bs.Batch != 7 || bs.Epoch != 3 || len(bs.Shares) != 3 || bs.Shares[2] != 3 {
		t.Fatalf("round trip: %v %d %d %+v", err, party, phase, bs)
	}
	flip := func(i int) []byte { b := bytes.Clone(good); b[i] ^= 1; return b }
	cases := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"short", good[:20]},
		{"magic", flip(0)},
		{"checksum", flip(len(good) - 1)},
		{"payload", flip(30)},
		{"truncated", good[:len(good)-8]},
	}
	for _, c := range cases {
		if _, _, _, err := DecodeBatchFile(c.in); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

// FuzzDecodeBootstrap: no panic; what the decoder accepts has n inputs (or
// none), at most n rows a field, all rows of a field of one length, within
// the row width it was given, in a message within bootstrapMessageBound.
func FuzzDecodeBootstrap(f *testing.F) {
	f.Add([]byte(`{"IDs":[[1,2],[3,4]]}`), 2, 0)
	f.Add([]byte(`{"Pixels":[[0.5]]}`), 1, 1)
	f.Add([]byte(`{}`), 3, 0)
	f.Add([]byte(`{"IDs":[[1,2],[3,4]],"Mask":[[1,1],[1,0]],"TypeIDs":null,"Pixels":null}`), 2, 4)
	f.Add([]byte(`{"pixels":[[],[],[]]}`), 2, 0)
	f.Add([]byte(`{"Pixels":[[1,2,3],[1]]}`), 2, 0)
	f.Fuzz(func(t *testing.T, b []byte, n, width int) {
		n, width = n%1000, width%1000
		in, err := decodeBootstrap(b, n, width)
		if err != nil {
			return
		}
		if in.Len() != n && in.Len() != 0 || len(b) > bootstrapMessageBound(n, width) {
			t.Fatalf("accepted %d inputs for %d in %d bytes", in.Len(), n, len(b))
		}
		for _, rows := range [][]int{rowLens(in.IDs), rowLens(in.TypeIDs), rowLens(in.Mask), rowLens(in.Pixels)} {
			if len(rows) > n {
				t.Fatalf("accepted %d rows for %d", len(rows), n)
			}
			for _, l := range rows {
				if l != rows[0] || width > 0 && l > width {
					t.Fatalf("accepted rows of %v values (width %d)", rows, width)
				}
			}
		}
	})
}

func rowLens[T any](rows [][]T) []int {
	out := make([]int, len(rows))
	for i, r := range rows {
		out[i] = len(r)
	}
	return out
}

// TestDecodeBootstrapBomb plays a data owner whose bootstrap message
// declares more than it holds: a list of a million empty rows (3 bytes each
// and a few on the wire once compressed, each a 24-byte slice header when
// decoded), a row far longer than an image, a row of commas, and a message
// beyond the bound for the sample. The old decoder unmarshalled the whole
// message before counting (a 128 MiB one took +3.6 GiB; here 153 MB for the
// 3 MB of empty rows, 13 MB for the long row, and it accepted ragged rows);
// now each is refused having allocated under 1 MiB beyond the message (the
// decoded inputs of an honest message, counted before they are allocated,
// are the only large allocation).
func TestDecodeBootstrapBomb(t *testing.T) {
	const n, width = 24, 784 // the secure fixture's sample of MNIST images
	row := "[" + strings.TrimSuffix(strings.Repeat("0.5,", width), ",") + "]"
	honest := []byte(`{"IDs":null,"TypeIDs":null,"Mask":null,"Pixels":[` + strings.TrimSuffix(strings.Repeat(row+",", n), ",") + `]}`)
	if in, err := decodeBootstrap(honest, n, width); err != nil || in.Len() != n {
		t.Fatalf("honest bootstrap: %d inputs, %v", in.Len(), err)
	}
	for _, c := range []struct {
		name  string
		msg   []byte
		width int
	}{
		{"a million empty rows", []byte(`{"Pixels":[` + strings.TrimSuffix(strings.Repeat("[],", 1<<20), ",") + `]}`), 0},
		{"a million empty rows, width known", []byte(`{"Pixels":[` + strings.TrimSuffix(strings.Repeat("[],", 1<<20), ",") + `]}`), width},
		{"a row of 300,000 values", []byte(`{"Pixels":[[` + strings.TrimSuffix(strings.Repeat("0,", 300_000), ",") + `]]}`), width},
		{"a row of commas", []byte(`{"Pixels":[[` + strings.Repeat(",", 1<<20) + `]]}`), width},
		{"rows longer than the first", []byte(`{"Pixels":[[0],` + strings.TrimSuffix(strings.Repeat(row+",", n-1), ",") + `]}`), 0},
		{"a field twice", []byte(`{"Pixels":` + "[" + row + "]" + `,"pixels":` + "[" + row + "]" + `}`), width},
		{"deep nesting", []byte(`{"Pixels":` + strings.Repeat("[", 1<<16) + `}`), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			in, err := decodeBootstrap(c.msg, n, c.width)
			runtime.ReadMemStats(&after)
			grew := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes: %v; allocated %d bytes beyond the message", len(c.msg), err, grew)
			if err == nil {
				t.Fatalf("accepted %d inputs", in.Len())
			}
			if grew > 1<<20+uint64(len(c.msg)) {
				t.Errorf("decoding a %d-byte message allocated %d bytes", len(c.msg), grew)
			}
		})
	}
}

// pointsHex is a well-formed State.Labelled.Points.
var pointsHex = strings.Repeat("ab", 32)

func TestDecodeStateErrors(t *testing.T) {
	cases := []struct{ name, in string }{
		{"not json", `{`},
		{"version", `{"version":2,"party":0}`},
		{"party", `{"version":1,"party":3}`},
		{"seed", `{"version":1,"party":0,"seed":"zz"}`},
		{"boot without coin", `{"version":1,"party":0,"bootstrap_done":true}`},
		{"phase before boot", `{"version":1,"party":0,"phases":[{}]}`},
		{"done without survivors", `{"version":1,"party":0,"seed":"` + seedHex + `","bootstrap_done":true,"phases":[{"done":true}]}`},
		{"unfinished earlier phase", `{"version":1,"party":0,"seed":"` + seedHex + `","bootstrap_done":true,"phases":[{},{}]}`},
		{"unsorted survivors", `{"version":1,"party":0,"seed":"` + seedHex + `","bootstrap_done":true,"phases":[{"done":true,"survivors":[3,1]}]}`},
		{"labels of a data owner", `{"version":1,"party":1,"labelled":{"bootstrap":[1],"points":"` + pointsHex + `","labels":[0]}}`},
		{"labels not one per point", `{"version":1,"party":0,"labelled":{"bootstrap":[1,2],"points":"` + pointsHex + `","labels":[0]}}`},
		{"labelled indices unsorted", `{"version":1,"party":0,"labelled":{"bootstrap":[2,1],"points":"` + pointsHex + `","labels":[0,1]}}`},
		{"negative label", `{"version":1,"party":0,"labelled":{"bootstrap":[1],"points":"` + pointsHex + `","labels":[-1]}}`},
		{"labelled points unhashed", `{"version":1,"party":0,"labelled":{"bootstrap":[1],"points":"ab","labels":[0]}}`},
	}
	for _, c := range cases {
		if _, err := DecodeState([]byte(c.in)); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

const seedHex = "0102030405060708091011121314151617181920212223242526272829303132"

// FuzzDecodeArchs feeds the data owner's decoding of the model owner's
// architectures arbitrary bytes: no panic, and what it accepts is within
// archsMessageBound, one architecture per phase, fits the checkpoint and the
// schedule and passes secure.Arch.Validate; a message of more than
// archsMessageBound bytes, or of more architectures than phases, is refused
// whatever else it holds.
func FuzzDecodeArchs(f *testing.F) {
	emb := model.Config{Family: model.ViT, Hidden: 32, Heads: 4, Layers: 2, Intermediate: 64}
	sched := []Phase{{Proxy: proxy.Shape{Layers: 1, Heads: 2, MLPHidden: 8}, Keep: 0.4}, {}}
	good := []secure.Arch{
		{Family: model.ViT, Layers: 1, Heads: 2, HeadDim: 8, Hidden: 32, Seq: 17, Labels: 10, MLPHidden: 8},
		{Family: model.ViT, Layers: 2, Heads: 4, HeadDim: 8, Hidden: 32, Seq: 17, Labels: 10, MLPHidden: 16, EntropyHidden: 128, Ablation: proxy.NoAttnSM},
	}
	b, _ := json.Marshal(good)
	f.Add(b)
	f.Add([]byte(`[{"layers":1},{}]`))
	f.Add([]byte(`[{"family":"vit","layers":2,"heads":4,"head_dim":8,"hidden":32,"seq":17,"labels":10,"mlp_hidden":1e9},{}]`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[{},{},{},{},{},{},{},{},{},{},{},{}]`))
	f.Add(append(b[:len(b)-1:len(b)-1], `,{}]`...))
	f.Add([]byte(` [ {"family":"vit"} , {} ] x`))
	f.Fuzz(func(t *testing.T, b []byte) {
		archs, err := decodeArchs(b, &emb, sched, len(sched), 17)
		if err != nil {
			return
		}
		var raw []json.RawMessage
		if len(b) > archsMessageBound(len(sched)) || json.Unmarshal(b, &raw) != nil || len(raw) != len(sched) || len(archs) != len(sched) {
			t.Fatalf("accepted %d bytes, a list of %d, as %d architectures for %d phases", len(b), len(raw), len(archs), len(sched))
		}
		for i, a := range archs {
			if err := a.Validate(); err != nil {
				t.Fatalf("accepted architecture %d fails Validate: %v", i, err)
			}
			if a.Layers > emb.Layers || a.Heads > emb.Heads || a.Hidden != emb.Hidden || a.Seq != 17 {
				t.Fatalf("accepted architecture %d does not fit the checkpoint: %+v", i, a)
			}
		}
	})
}
