package selection

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
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
