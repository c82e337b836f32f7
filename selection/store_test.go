package selection

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/nn/model"
)

// TestCheckpointStore: what save and record write, load reads back (the
// state with its batch files), prune removes the batches a state no longer
// holds, every file is 0600 in 0700 directories, and a store without a
// directory writes nothing but hands the revealed record to remember.
func TestCheckpointStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	c := &checkpointStore{dir: dir, party: 1}
	if st, err := c.load(); st != nil || err != nil {
		t.Fatalf("empty directory: %v, %v", st, err)
	}
	st := &State{Version: stateVersion, Party: 1, ViewHash: "v", Epoch: 2, Seed: "abababababababababababababababababababababababababababababababab",
		BootstrapDone: true, Bootstrap: []int{3, 7}, Phases: []PhaseState{{}},
		Revealed: &Revealed{ViewHash: "v", Seed: "abababababababababababababababababababababababababababababababab", Bootstrap: []int{3, 7}}}
	if err := c.save(st); err != nil {
		t.Fatal(err)
	}
	for _, b := range []BatchShares{{Batch: 0, Epoch: 2, Shares: []uint64{1, 2}}, {Batch: 4, Epoch: 2, Shares: []uint64{9}}} {
		if err := c.record(0, b); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.load()
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got.Phases[0].Batches, func(a, b BatchShares) int { return a.Batch - b.Batch })
	if got.Epoch != 2 || !slices.Equal(got.Bootstrap, st.Bootstrap) || len(got.Phases[0].Batches) != 2 ||
		got.Phases[0].Batches[1].Batch != 4 || !slices.Equal(got.Phases[0].Batches[0].Shares, []uint64{1, 2}) {
		t.Fatalf("loaded %+v", got)
	}
	checkPrivateModes(t, dir)

	// prune keeps batch 4 only.
	got.Phases[0].Batches = got.Phases[0].Batches[1:]
	if err := c.prune(got); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.batchPath(0, 0)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("batch 0 not pruned: %v", err)
	}
	if _, err := os.Stat(c.batchPath(0, 4)); err != nil {
		t.Errorf("batch 4 pruned: %v", err)
	}

	// The other party's store refuses this party's file.
	if err := os.Rename(StateFile(dir, 1), StateFile(dir, 0)); err != nil {
		t.Fatal(err)
	}
	var se *StateError
	if _, err := (&checkpointStore{dir: dir, party: 0}).load(); !errors.As(err, &se) {
		t.Errorf("foreign state file: %v", err)
	}

	// Without a directory: nothing on disk, the record goes to remember.
	var kept *Revealed
	mem := &checkpointStore{party: 1, remember: func(r *Revealed) { kept = r }}
	if err := mem.save(st); err != nil || kept == nil || !slices.Equal(kept.Bootstrap, []int{3, 7}) {
		t.Fatalf("in-memory save: %v, %+v", err, kept)
	}
	kept.Bootstrap[0] = 99
	if st.Revealed.Bootstrap[0] != 3 {
		t.Error("remember got the state's own slice, not a copy")
	}
	if err := mem.record(0, BatchShares{Batch: 1, Shares: []uint64{1}}); err != nil {
		t.Fatal(err)
	}
	if got, err := mem.load(); got != nil || err != nil {
		t.Errorf("in-memory load: %v, %v", got, err)
	}
}

// TestProxyDir: proxies live in phase-<n>, n numbered from 1 as the phases
// are in every message; a directory of the older 0-based layout (it has a
// phase-0) is read with its own numbering.
func TestProxyDir(t *testing.T) {
	for _, tc := range []struct {
		name   string
		legacy bool
		phase  int
		want   string
	}{
		{"first", false, 0, "phase-1"},
		{"second", false, 1, "phase-2"},
		{"legacy-first", true, 0, "phase-0"},
		{"legacy-second", true, 1, "phase-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.legacy {
				if err := os.Mkdir(filepath.Join(dir, "phase-0"), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if got := ProxyDir(dir, tc.phase); got != filepath.Join(dir, tc.want) {
				t.Fatalf("ProxyDir(phase %d) = %s, want %s", tc.phase, got, tc.want)
			}
		})
	}
}

// TestLegacyBatchDirsLoad: a state directory written before phases were
// numbered from 1 (batches-p1/phase-0, phase-1) still loads: its batch
// directories are renamed to phase-1, phase-2 (BatchDir) and every batch is
// read back in its phase; a renaming interrupted at any step (the old root
// moved aside, some phases moved) is finished by the next load (issue 39).
func TestLegacyBatchDirsLoad(t *testing.T) {
	seed := "abababababababababababababababababababababababababababababababab"
	st := &State{Version: stateVersion, Party: 1, ViewHash: "v", Epoch: 2, Seed: seed, BootstrapDone: true, Bootstrap: []int{3, 7},
		Phases: []PhaseState{{Done: true, Survivors: []int{1, 2}}, {}}, Revealed: &Revealed{ViewHash: "v", Seed: seed, Bootstrap: []int{3, 7}}}
	batches := [][]BatchShares{{{Batch: 0, Epoch: 1, Shares: []uint64{1}}, {Batch: 1, Epoch: 1, Shares: []uint64{2}}}, {{Batch: 0, Epoch: 2, Shares: []uint64{3}}}}
	// writeLegacy writes st with its batches in the layout numbered from 0
	// under root (batches-p1 or its moved-aside name).
	writeLegacy := func(t *testing.T, dir, root string, phases ...int) {
		t.Helper()
		for _, ph := range phases {
			for _, bs := range batches[ph] {
				path := filepath.Join(dir, root, fmt.Sprintf("phase-%d", ph), fmt.Sprintf("batch-%d.bin", bs.Batch))
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, encodeBatch(batchFile{Party: 1, Phase: ph, BatchShares: bs}), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, dir string)
	}{
		{"numbered-from-0", func(t *testing.T, dir string) { writeLegacy(t, dir, "batches-p1", 0, 1) }},
		{"moved-aside", func(t *testing.T, dir string) { writeLegacy(t, dir, "batches-p1.numbered-from-0", 0, 1) }},
		{"half-renamed", func(t *testing.T, dir string) {
			writeLegacy(t, dir, "batches-p1.numbered-from-0", 0)
			writeLegacy(t, dir, "batches-p1", 1)
			if err := os.Rename(filepath.Join(dir, "batches-p1", "phase-1"), filepath.Join(dir, "batches-p1", "phase-2")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := &checkpointStore{dir: dir, party: 1}
			if err := c.save(st); err != nil {
				t.Fatal(err)
			}
			tc.write(t, dir)
			got, err := c.load()
			if err != nil {
				t.Fatal(err)
			}
			for ph, want := range batches {
				bs := got.Phases[ph].Batches
				slices.SortFunc(bs, func(a, b BatchShares) int { return a.Batch - b.Batch })
				if len(bs) != len(want) {
					t.Fatalf("phase %d: %d batches, want %d", ph+1, len(bs), len(want))
				}
				for i := range want {
					if bs[i].Batch != want[i].Batch || !slices.Equal(bs[i].Shares, want[i].Shares) {
						t.Errorf("phase %d: batch %+v, want %+v", ph+1, bs[i], want[i])
					}
				}
			}
			ents, _ := os.ReadDir(filepath.Join(dir, "batches-p1"))
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if !slices.Equal(names, []string{"phase-1", "phase-2"}) {
				t.Errorf("batch directories %v, want [phase-1 phase-2]", names)
			}
			if _, err := os.Stat(filepath.Join(dir, "batches-p1.numbered-from-0")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the moved-aside root is left: %v", err)
			}
			// New batches go to the phase's number.
			if err := c.record(1, BatchShares{Batch: 5, Epoch: 3, Shares: []uint64{4}}); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, "batches-p1", "phase-2", "batch-5.bin")); err != nil {
				t.Errorf("a batch of phase 2: %v", err)
			}
		})
	}
}

// TestResultReadsLegacyDealerBytes: a result written before the traffic of
// correlated randomness was named randomness_bytes (dealer_bytes, in both
// modes) still decodes, phases and shards alike; the new name wins when
// both are present (issue 39).
func TestResultReadsLegacyDealerBytes(t *testing.T) {
	var r Result
	in := `{"selected":[1],"phases":[{"in":4,"dealer_bytes":7,"shards":[{"shard":1,"dealer_bytes":5}]},{"randomness_bytes":9,"dealer_bytes":3}]}`
	if err := json.Unmarshal([]byte(in), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Phases) != 2 || r.Phases[0].In != 4 || r.Phases[0].RandomnessBytes != 7 || r.Phases[0].Shards[0].Shard != 1 ||
		r.Phases[0].Shards[0].RandomnessBytes != 5 || r.Phases[1].RandomnessBytes != 9 {
		t.Fatalf("decoded %+v", r.Phases)
	}
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"randomness_bytes":7`) || strings.Contains(string(out), "dealer_bytes") {
		t.Fatalf("encoded %s", out)
	}
}

// TestLabelsOfSamePointsOnly: recorded bootstrap labels are reused only
// for the same indices and the same inputs: a data owner that sends other
// points under the recorded indices after a restart gets them labelled
// afresh, not given the old labels.
func TestLabelsOfSamePointsOnly(t *testing.T) {
	in := model.Input{Pixels: [][]float64{{0.5}, {0.25}}}
	st := &State{Labelled: &BootstrapLabels{Bootstrap: []int{3, 7}, Points: pointsHash(in), Labels: []int{1, 0}}}
	if l, ok := st.labelsOf([]int{3, 7}, in); !ok || !slices.Equal(l, []int{1, 0}) {
		t.Fatalf("same points: %v, %v", l, ok)
	}
	if _, ok := st.labelsOf([]int{3, 7}, model.Input{Pixels: [][]float64{{0.5}, {0.75}}}); ok {
		t.Error("labels reused for other inputs under the same indices")
	}
	if _, ok := st.labelsOf([]int{3, 8}, in); ok {
		t.Error("labels reused for other indices")
	}
	if _, ok := (&State{}).labelsOf([]int{3, 7}, in); ok {
		t.Error("labels found in a state without any")
	}
}
