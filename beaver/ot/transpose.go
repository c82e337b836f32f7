package ot

// transpose128 turns the 128 columns of one 128-OT block of the extension
// matrix (column i is cols[i]: bit o of it, Lo then Hi, is OT o) into the
// 128 rows: bit i of rows[o] is bit o of column i. Where the CPU has
// AVX-512 VBMI and GFNI it runs transpose128GFNI (transpose_amd64.s:
// 25–29 ns against 0.7–1 µs in BenchmarkTranspose on the AMD EPYC Zen 5,
// where the portable transpose took a twentieth of a dealer-free party's
// CPU, issue 38), otherwise transpose128Generic.
func transpose128(rows []Block, cols *[baseCount]Block) {
	if useTransposeGFNI {
		transpose128Asm((*[128]Block)(rows[:128]), cols)
		return
	}
	transpose128Generic(rows, cols)
}

// transpose128Generic is transpose128 in portable Go. It swaps the
// off-diagonal 64×64 quadrants (each row's Hi with the Lo of the row 64
// below), then transposes the four quadrants at once, both words of a row
// together, by the recursive swaps of share.Transpose64 unrolled per level.
func transpose128Generic(rows []Block, cols *[baseCount]Block) {
	a := (*[128]Block)(rows[:128])
	for i := range 64 { // the copy and the quadrant swap in one pass
		a[i], a[i+64] = Block{cols[i].Lo, cols[i+64].Lo}, Block{cols[i].Hi, cols[i+64].Hi}
	}
	swapLevel(a, 32, 0x00000000FFFFFFFF)
	swapLevel(a, 16, 0x0000FFFF0000FFFF)
	swapLevel(a, 8, 0x00FF00FF00FF00FF)
	swapLevel(a, 4, 0x0F0F0F0F0F0F0F0F)
	swapLevel(a, 2, 0x3333333333333333)
	swapLevel(a, 1, 0x5555555555555555)
}

// swapLevel exchanges, for every pair of rows (r, r+j) with bit j of r
// clear, the high j-bit halves of row r's 2j-bit fields with the low halves
// of row r+j's (m selects the low halves), in both words.
func swapLevel(a *[128]Block, j uint, m uint64) {
	j &= 63
	for base := 0; base < 128; base += int(2 * j) {
		lo := a[base : base+int(j)]
		hi := a[base+int(j) : base+int(2*j)]
		for r := range lo {
			x, y := &lo[r], &hi[r]
			t0 := (x.Lo>>j ^ y.Lo) & m
			t1 := (x.Hi>>j ^ y.Hi) & m
			x.Lo ^= t0 << j
			x.Hi ^= t1 << j
			y.Lo ^= t0
			y.Hi ^= t1
		}
	}
}
