//go:build !purego

package ot

import "golang.org/x/sys/cpu"

// lpnRowsAVX512 maps the key stream of cols columns to their rows, each
// 32-bit word w of ks to ⌊w·k/2^32⌋ in idx (k < 2^32), and sets bit c of
// dup for every column c whose d = 10 rows are not distinct (VPCONFLICTD
// on the column's ten words); dup must be zero on entry. Implemented in
// ferret_lpn_amd64.s.
//
//go:noescape
func lpnRowsAVX512(idx *uint32, ks *byte, cols int, k uint64, dup *uint64)

// lpnGatherAsm sets z[c] ^= ⊕ base[idx[10c+r]] for r < 10 and c < cols:
// the encoding's sum of d base blocks, an index's scale and load in one
// VPXOR each. Implemented in ferret_lpn_amd64.s.
//
//go:noescape
func lpnGatherAsm(z, base *Block, idx *uint32, cols int)

// lpnGatherBitsAsm is lpnGatherAsm that also XORs into bit c of bits the
// parity of bits idx[10c] … idx[10c+9] of u (the receiver's choices);
// bits holds ⌈cols/64⌉ words. Implemented in ferret_lpn_amd64.s.
//
//go:noescape
func lpnGatherBitsAsm(z, base *Block, idx *uint32, cols int, u, bits *uint64)

// useLPNAsm selects the assembly encoding: AVX-512 F with CD for the rows'
// distinctness test (x/sys/cpu checks that the OS saves the ZMM state).
var useLPNAsm = cpu.X86.HasAVX512F && cpu.X86.HasAVX512CD
