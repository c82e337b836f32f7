package selection

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/model"
	"github.com/selectformer/selectformer/proxy/secure"
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

func FuzzDecodeBootstrap(f *testing.F) {
	f.Add([]byte(`{"IDs":[[1,2],[3,4]]}`), 2)
	f.Add([]byte(`{"Pixels":[[0.5]]}`), 1)
	f.Add([]byte(`{}`), 3)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		in, err := DecodeBootstrap(b, n)
		if err == nil && in.Len() != n && in.Len() != 0 {
			t.Fatalf("accepted %d inputs for %d", in.Len(), n)
		}
	})
}

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
	sched := []Phase{{Proxy: proxy.Shape{Layers: 1, Heads: 2, Hidden: 8}, Keep: 0.4}, {}}
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
