package ot

import "github.com/selectformer/selectformer/share"

// colsToRows turns the 128 columns of an IKNP matrix (column i is
// cols[i*nw:(i+1)*nw], bit b of word w being OT 64w+b) into the 64·nw rows
// of 128 bits: bit i of row j is bit j of column i. It works on 64×64 tiles.
func colsToRows(rows []Block, cols []uint64, nw int) {
	var m [64]uint64
	for w := range nw {
		for c := range 64 {
			m[c] = cols[c*nw+w]
		}
		share.Transpose64(&m)
		for b := range 64 {
			rows[64*w+b].Lo = m[b]
		}
		for c := range 64 {
			m[c] = cols[(64+c)*nw+w]
		}
		share.Transpose64(&m)
		for b := range 64 {
			rows[64*w+b].Hi = m[b]
		}
	}
}
