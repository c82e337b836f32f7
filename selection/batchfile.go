package selection

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/selectformer/selectformer/internal/atomicfile"
)

// A finished batch's shares live in their own file, written once, so that a
// checkpoint after a batch costs O(batch) and not O(pool):
//
//	StateDir/batches-p<party>/phase-<i>/batch-<b>.bin
//
// Format (little-endian): "SFB1", party u8, 3 zero bytes, phase u32,
// batch u32, epoch u64, n u32, n shares u64, CRC-32C of everything before.

const batchMagic = "SFB1"

// maxBatchShares bounds n in a batch file.
const maxBatchShares = 1 << 24

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// batchFile is one decoded batch file.
type batchFile struct {
	Party, Phase int
	BatchShares
}

// encodeBatch serializes a batch file.
func encodeBatch(f batchFile) []byte {
	b := make([]byte, 0, 32+8*len(f.Shares)+4)
	b = append(b, batchMagic...)
	b = append(b, byte(f.Party), 0, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(f.Phase))
	b = binary.LittleEndian.AppendUint32(b, uint32(f.Batch))
	b = binary.LittleEndian.AppendUint64(b, f.Epoch)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(f.Shares)))
	for _, w := range f.Shares {
		b = binary.LittleEndian.AppendUint64(b, w)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// DecodeBatchFile parses a checkpointed batch file, returning the party,
// phase and the batch's shares.
func DecodeBatchFile(b []byte) (party, phase int, bs BatchShares, err error) {
	const head = 4 + 4 + 4 + 4 + 8 + 4
	if len(b) < head+4 {
		return 0, 0, bs, fmt.Errorf("selection: batch file: %d bytes", len(b))
	}
	if string(b[:4]) != batchMagic {
		return 0, 0, bs, fmt.Errorf("selection: batch file: bad magic %q", b[:4])
	}
	if got, want := binary.LittleEndian.Uint32(b[len(b)-4:]), crc32.Checksum(b[:len(b)-4], crcTable); got != want {
		return 0, 0, bs, fmt.Errorf("selection: batch file: checksum %08x, want %08x", got, want)
	}
	party = int(b[4])
	if party > 1 || b[5] != 0 || b[6] != 0 || b[7] != 0 {
		return 0, 0, bs, fmt.Errorf("selection: batch file: bad party bytes % x", b[4:8])
	}
	ph := binary.LittleEndian.Uint32(b[8:])
	bt := binary.LittleEndian.Uint32(b[12:])
	if ph > 1<<20 || bt > 1<<30 {
		return 0, 0, bs, fmt.Errorf("selection: batch file: phase %d batch %d out of range", ph, bt)
	}
	bs.Batch = int(bt)
	bs.Epoch = binary.LittleEndian.Uint64(b[16:])
	n := binary.LittleEndian.Uint32(b[24:])
	if n > maxBatchShares || len(b) != head+8*int(n)+4 {
		return 0, 0, bs, fmt.Errorf("selection: batch file: %d shares in %d bytes", n, len(b))
	}
	bs.Shares = make([]uint64, n)
	for i := range bs.Shares {
		bs.Shares[i] = binary.LittleEndian.Uint64(b[head+8*i:])
	}
	return party, int(ph), bs, nil
}

func phaseDir(dir string, party, phase int) string {
	return filepath.Join(dir, fmt.Sprintf("batches-p%d", party), fmt.Sprintf("phase-%d", phase))
}

func batchPath(dir string, party, phase, batch int) string {
	return filepath.Join(phaseDir(dir, party, phase), fmt.Sprintf("batch-%d.bin", batch))
}

// writeAtomic writes b to path (mode 0600, creating its directory): a crash
// leaves either the old file or the new one, never a partial one.
func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o600)
}

// saveBatch checkpoints one finished batch.
func saveBatch(dir string, party, phase int, bs BatchShares) error {
	if err := writeAtomic(batchPath(dir, party, phase, bs.Batch), encodeBatch(batchFile{Party: party, Phase: phase, BatchShares: bs})); err != nil {
		return fmt.Errorf("selection: checkpoint batch %d of phase %d: %w", bs.Batch, phase, err)
	}
	return nil
}

// loadBatches reads the batch files of s's phases.
func (s *State) loadBatches(dir string) error {
	for i := range s.Phases {
		pd := phaseDir(dir, s.Party, i)
		ents, err := os.ReadDir(pd)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return &StateError{Path: pd, Err: err}
		}
		for _, e := range ents {
			name := e.Name()
			if !strings.HasPrefix(name, "batch-") || !strings.HasSuffix(name, ".bin") {
				continue // temporary files of an interrupted write
			}
			nb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, "batch-"), ".bin"))
			if err != nil {
				continue
			}
			path := filepath.Join(pd, name)
			b, err := os.ReadFile(path)
			if err != nil {
				return &StateError{Path: path, Err: err}
			}
			party, phase, bs, err := DecodeBatchFile(b)
			if err != nil {
				return &StateError{Path: path, Err: err}
			}
			if party != s.Party || phase != i || bs.Batch != nb {
				return &StateError{Path: path, Err: fmt.Errorf("holds party %d phase %d batch %d", party, phase, bs.Batch)}
			}
			s.Phases[i].Batches = append(s.Phases[i].Batches, bs)
		}
	}
	return nil
}

// pruneBatches removes the batch files that s no longer holds (after
// reconcile), so that stale shares can never be mixed with recomputed ones.
func (s *State) pruneBatches(dir string) error {
	root := filepath.Join(dir, fmt.Sprintf("batches-p%d", s.Party))
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("selection: prune state: %w", err)
	}
	for _, e := range ents {
		ph, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "phase-"))
		if err != nil || ph >= len(s.Phases) {
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
