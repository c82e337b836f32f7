package selection

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// A finished batch's shares live in their own file, written once, so that a
// checkpoint after a batch costs O(batch) and not O(pool):
//
//	StateDir/batches-p<party>/phase-<n>/batch-<b>.bin
//
// with n the phase's number from 1 (BatchDir). Format (little-endian):
// "SFB1", party u8, 3 zero bytes, phase u32 (0-based),
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
