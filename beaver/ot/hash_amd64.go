//go:build !purego

package ot

// hashRowsVAES512 is hasher.hashPass for w = 1 or 2 in 512-bit VAES, n a
// positive multiple of 32 rows, the tweak's high word hi (gen‖0).
// Implemented in hash_amd64.s.
//
//go:noescape
func hashRowsVAES512(rk *[176]byte, out *uint64, rows *Block, n int, off *Block, j0, hi uint64, w int)
