//go:build !purego

package ot

// hashRowsVAES512 is hasher.hashPass for w = 1 or 2 in 512-bit VAES, n a
// positive multiple of 32 rows, the tweak's high word hi (gen‖0).
// Implemented in hash_amd64.s.
//
//go:noescape
func hashRowsVAES512(rk *[176]byte, out *uint64, rows *Block, n int, off *Block, j0, hi uint64, w int)

// hashWideVAES512 is the second pass of hasher.hashPass for widths that
// are multiples of 8 words, in 512-bit VAES: m (a positive multiple of 8)
// groups of four hash blocks of one row, group g from its row's first pass
// ys[g] and first tweak tweaks[g]. Implemented in hash_amd64.s.
//
//go:noescape
func hashWideVAES512(rk *[176]byte, out *uint64, ys, tweaks *Block, m int)
