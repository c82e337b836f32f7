package ot

// transpose64 transposes the 64×64 bit matrix a in place: bit c of a[r]
// becomes bit r of a[c]. It is the recursive block swap of Hacker's Delight
// §7-3: six passes that exchange the off-diagonal 32×32, 16×16, …, 1×1
// blocks, 32 word pairs per pass (no per-bit work).
func transpose64(a *[64]uint64) {
	m := uint64(0x00000000FFFFFFFF)
	for j := 32; j != 0; j >>= 1 {
		for k := 0; k < 64; k = (k + j + 1) &^ j {
			t := (a[k]>>uint(j) ^ a[k+j]) & m
			a[k] ^= t << uint(j)
			a[k+j] ^= t
		}
		m ^= m << uint(j/2)
	}
}

// colsToRows turns the 128 columns of an IKNP matrix (column i is
// cols[i*nw:(i+1)*nw], bit b of word w being OT 64w+b) into the 64·nw rows
// of 128 bits: bit i of row j is bit j of column i. It works on 64×64 tiles.
func colsToRows(rows []Block, cols []uint64, nw int) {
	var m [64]uint64
	for w := range nw {
		for c := range 64 {
			m[c] = cols[c*nw+w]
		}
		transpose64(&m)
		for b := range 64 {
			rows[64*w+b].Lo = m[b]
		}
		for c := range 64 {
			m[c] = cols[(64+c)*nw+w]
		}
		transpose64(&m)
		for b := range 64 {
			rows[64*w+b].Hi = m[b]
		}
	}
}
