package selection

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/internal/atomicfile"
)

// checkpointStore is one party's checkpoint on disk: the state file
// (StateFile) and the batch files (DecodeBatchFile) in its state directory.
// It is the only code that reads or writes them: every write is atomic
// (temporary file, fsync, rename, directory fsync) with mode 0600 in
// directories of mode 0700, so a crash leaves either the old file or the
// new one.
//
// Without a directory nothing is written: load finds nothing, record and
// prune do nothing, and save hands the data owner's record of what it
// revealed to remember (if set), which keeps it in memory.
type checkpointStore struct {
	// dir is the state directory ("" for none).
	dir string
	// party is the owner's party (0 or 1).
	party int
	// remember, if set, receives a copy of State.Revealed on every save
	// when there is no directory.
	remember func(*Revealed)
}

// durable reports whether the store writes to disk.
func (c *checkpointStore) durable() bool { return c.dir != "" }

// statePath is the state file.
func (c *checkpointStore) statePath() string { return StateFile(c.dir, c.party) }

// MarksFile returns party's file of high-water marks (marks.Provider) in dir:
// the positions of correlated randomness the party has drawn, per session.
func MarksFile(dir string, party int) string {
	return filepath.Join(dir, fmt.Sprintf("marks-p%d.json", party))
}

// ProxyDir returns the directory of phase's proxy (phase 0-based, as
// Params.Schedule indexes it) under dir, a run's StateDir/proxies or a copy
// of it: dir/phase-<n> with n = phase+1, the phase's number as logs, errors,
// progress and summaries print it. A directory written before phases were
// numbered from 1 (it has a phase-0) is read with its own numbering.
func ProxyDir(dir string, phase int) string {
	n := phase + 1
	if fi, err := os.Stat(filepath.Join(dir, "phase-0")); err == nil && fi.IsDir() {
		n = phase
	}
	return filepath.Join(dir, fmt.Sprintf("phase-%d", n))
}

// BatchDir returns the directory of party's batch files of phase (0-based,
// as Params.Schedule indexes it) in the state directory dir:
// dir/batches-p<party>/phase-<n> with n = phase+1, the phase's number as
// logs, errors, progress and summaries print it. A state directory written
// before phases were numbered from 1 (its batches-p<party> has a phase-0)
// is renamed to this layout when a run loads it.
func BatchDir(dir string, party, phase int) string {
	return filepath.Join(batchRoot(dir, party), phaseName(phase))
}

// batchRoot is the directory of party's batch files in dir.
func batchRoot(dir string, party int) string {
	return filepath.Join(dir, fmt.Sprintf("batches-p%d", party))
}

// phaseName is the name of phase's directory (phase 0-based): phase-<n>,
// n = phase+1.
func phaseName(phase int) string { return fmt.Sprintf("phase-%d", phase+1) }

// phaseOf parses a phase directory's name (phaseName) into its 0-based
// phase.
func phaseOf(name string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(name, "phase-"))
	if err != nil || !strings.HasPrefix(name, "phase-") || n < 1 {
		return 0, false
	}
	return n - 1, true
}

// batchRoot is the directory of the party's batch files.
func (c *checkpointStore) batchRoot() string { return batchRoot(c.dir, c.party) }

// phaseDir is the directory of phase's batch files.
func (c *checkpointStore) phaseDir(phase int) string { return BatchDir(c.dir, c.party, phase) }

// legacyRoot is where renumber moves a batch directory of the layout
// numbered from 0 while it renames its phases.
func (c *checkpointStore) legacyRoot() string { return c.batchRoot() + ".numbered-from-0" }

// renumber renames the batch directories of a state directory written
// before phases were numbered from 1 (batches-p<party>/phase-0, phase-1,
// ...) to BatchDir's layout (phase-1, phase-2, ...): it moves the root
// aside (one atomic rename), then each phase-i into a fresh root as
// phase-(i+1), then removes what is left of the old root. A crash at any
// step is finished by the next load (the moved-aside root is the marker),
// and no two directories of either layout are ever mixed in one root.
func (c *checkpointStore) renumber() error {
	root, old := c.batchRoot(), c.legacyRoot()
	if fi, err := os.Stat(filepath.Join(root, "phase-0")); err == nil && fi.IsDir() {
		if _, err := os.Stat(old); err == nil {
			return &StateError{Path: old, Err: fmt.Errorf("a batch directory numbered from 0 beside %s, which is too: remove one", root)}
		}
		if err := os.Rename(root, old); err != nil {
			return &StateError{Path: root, Err: fmt.Errorf("renumber the phases from 1: %w", err)}
		}
	}
	ents, err := os.ReadDir(old)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &StateError{Path: old, Err: err}
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return &StateError{Path: root, Err: err}
	}
	for _, e := range ents {
		i, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "phase-"))
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "phase-") || err != nil || i < 0 {
			continue // dropped with the old root
		}
		to := filepath.Join(root, phaseName(i))
		if _, err := os.Stat(to); err == nil {
			return &StateError{Path: to, Err: fmt.Errorf("exists while phase-%d of %s is renumbered into it", i, old)}
		}
		if err := os.Rename(filepath.Join(old, e.Name()), to); err != nil {
			return &StateError{Path: to, Err: fmt.Errorf("renumber the phases from 1: %w", err)}
		}
	}
	if err := os.RemoveAll(old); err != nil {
		return &StateError{Path: old, Err: err}
	}
	return nil
}

// batchPath is the file of one batch.
func (c *checkpointStore) batchPath(phase, batch int) string {
	return filepath.Join(c.phaseDir(phase), fmt.Sprintf("batch-%d.bin", batch))
}

// write writes b to path atomically, mode 0600, creating its directory
// (0700).
func (c *checkpointStore) write(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o600)
}

// load reads the party's checkpoint with its batch files; nil when there is
// no directory or no state file yet. A file that cannot be read or decoded,
// or that belongs to the other party, is a *StateError.
func (c *checkpointStore) load() (*State, error) {
	if !c.durable() {
		return nil, nil
	}
	path := c.statePath()
	b, err := atomicfile.ReadLimited(path, maxStateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &StateError{Path: path, Err: err}
	}
	s, err := DecodeState(b)
	if err != nil {
		return nil, &StateError{Path: path, Err: err}
	}
	if s.Party != c.party {
		return nil, &StateError{Path: path, Err: fmt.Errorf("belongs to party %d", s.Party)}
	}
	if err := c.renumber(); err != nil {
		return nil, err
	}
	if err := c.loadBatches(s); err != nil {
		return nil, err
	}
	return s, nil
}

// save writes the state file (batch shares are written by record); without
// a directory it hands State.Revealed to remember.
func (c *checkpointStore) save(s *State) error {
	if !c.durable() {
		if c.remember != nil && s.Revealed != nil {
			c.remember(s.Revealed.clone())
		}
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("selection: save state: %w", err)
	}
	if err := c.write(c.statePath(), b); err != nil {
		return withCode(AbortState, fmt.Errorf("selection: save state: %w", err))
	}
	return nil
}

// record writes one finished batch of phase to its own file, written once,
// so that a checkpoint after a batch costs O(batch) and not O(pool).
func (c *checkpointStore) record(phase int, bs BatchShares) error {
	if !c.durable() {
		return nil
	}
	b := encodeBatch(batchFile{Party: c.party, Phase: phase, BatchShares: bs})
	if err := c.write(c.batchPath(phase, bs.Batch), b); err != nil {
		return withCode(AbortState, fmt.Errorf("selection: checkpoint batch %d of phase %d: %w", bs.Batch, phase+1, err))
	}
	return nil
}

// loadBatches reads the batch files of s's phases into s.
func (c *checkpointStore) loadBatches(s *State) error {
	for i := range s.Phases {
		pd := c.phaseDir(i)
		ents, err := os.ReadDir(pd)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return &StateError{Path: pd, Err: err}
		}
		for _, e := range ents {
			nb, ok := batchNumber(e.Name())
			if !ok {
				continue // temporary files of an interrupted write
			}
			path := filepath.Join(pd, e.Name())
			b, err := os.ReadFile(path)
			if err != nil {
				return &StateError{Path: path, Err: err}
			}
			party, phase, bs, err := DecodeBatchFile(b)
			if err != nil {
				return &StateError{Path: path, Err: err}
			}
			if party != s.Party || phase != i || bs.Batch != nb {
				return &StateError{Path: path, Err: fmt.Errorf("holds party %d phase %d batch %d", party, phase+1, bs.Batch)}
			}
			s.Phases[i].Batches = append(s.Phases[i].Batches, bs)
		}
	}
	return nil
}

// batchNumber parses "batch-<b>.bin".
func batchNumber(name string) (int, bool) {
	if !strings.HasPrefix(name, "batch-") || !strings.HasSuffix(name, ".bin") {
		return 0, false
	}
	nb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, "batch-"), ".bin"))
	return nb, err == nil
}

// prune removes the batch files that s no longer holds (after reconcile),
// so that stale shares can never be mixed with recomputed ones.
func (c *checkpointStore) prune(s *State) error {
	if !c.durable() {
		return nil
	}
	root := c.batchRoot()
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("selection: prune state: %w", err)
	}
	for _, e := range ents {
		ph, ok := phaseOf(e.Name())
		if !ok || ph >= len(s.Phases) {
			if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
				return fmt.Errorf("selection: prune state: %w", err)
			}
			continue
		}
		keep := map[int]bool{}
		for _, b := range s.Phases[ph].Batches {
			keep[b.Batch] = true
		}
		pd := filepath.Join(root, e.Name())
		files, err := os.ReadDir(pd)
		if err != nil {
			return fmt.Errorf("selection: prune state: %w", err)
		}
		for _, f := range files {
			nb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(f.Name(), "batch-"), ".bin"))
			if err != nil || !keep[nb] {
				if err := os.Remove(filepath.Join(pd, f.Name())); err != nil {
					return fmt.Errorf("selection: prune state: %w", err)
				}
			}
		}
	}
	return nil
}

// finishedPath is the file that marks a ForwardRun finished with the peer
// (FinishedFile).
func (c *checkpointStore) finishedPath() string { return FinishedFile(c.dir, c.party) }

// markFinished records that the ForwardRun of session, whose every batch
// this party holds, was finished with the peer (both sides' Finish
// returned).
func (c *checkpointStore) markFinished(session beaver.SessionID) error {
	if !c.durable() {
		return nil
	}
	if err := c.write(c.finishedPath(), []byte(hex.EncodeToString(session[:]))); err != nil {
		return withCode(AbortState, fmt.Errorf("selection: worker: mark the job finished: %w", err))
	}
	return nil
}

// finished reports whether markFinished recorded the job of session; a
// marker that is not the session's (or larger than one) is a *StateError.
func (c *checkpointStore) finished(session beaver.SessionID) (bool, error) {
	if !c.durable() {
		return false, nil
	}
	path := c.finishedPath()
	want := hex.EncodeToString(session[:])
	b, err := atomicfile.ReadLimited(path, int64(len(want)))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, &StateError{Path: path, Err: err}
	}
	if string(b) != want {
		return false, &StateError{Path: path, Err: fmt.Errorf("marks another job finished: give each job its own directory (shard.JobDir)")}
	}
	return true, nil
}

// proxiesDir is the directory of the model owner's generated proxies
// (proxy.Save, one subdirectory per phase); "" without a state directory.
func (c *checkpointStore) proxiesDir() string {
	if !c.durable() {
		return ""
	}
	return filepath.Join(c.dir, "proxies")
}
