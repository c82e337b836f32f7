package share

// transposeBlock writes the n×m transpose of the m×n row-major src into dst,
// in 32×32 tiles; whole 4×4 blocks go through transpose4x4 (assembly with
// AVX2), the ragged edges word by word.
func transposeBlock(dst, src []uint64, m, n int) {
	const tile = 32
	if m == 0 || n == 0 {
		return
	}
	_ = src[m*n-1]
	_ = dst[m*n-1]
	for i0 := 0; i0 < m; i0 += tile {
		i1 := min(i0+tile, m)
		for j0 := 0; j0 < n; j0 += tile {
			j1 := min(j0+tile, n)
			// The 4×4-aligned part of the tile, then its right and bottom
			// edges.
			h, w := (i1-i0)&^3, (j1-j0)&^3
			if h > 0 && w > 0 {
				transposeTile4(dst[j0*m+i0:], src[i0*n+j0:], m, n, h, w)
			}
			for i := i0; i < i1; i++ {
				jStart := j0 + w
				if i >= i0+h {
					jStart = j0
				}
				row := src[i*n+jStart : i*n+j1]
				for j, v := range row {
					dst[(jStart+j)*m+i] = v
				}
			}
		}
	}
}

// transposeTile4Generic writes the w×h transpose of the h×w block at src
// (rows lds words apart) to dst (rows ldd words apart); h and w are
// multiples of 4.
func transposeTile4Generic(dst, src []uint64, ldd, lds, h, w int) {
	for i := 0; i < h; i += 4 {
		for j := 0; j < w; j += 4 {
			r0 := src[i*lds+j : i*lds+j+4 : i*lds+j+4]
			r1 := src[(i+1)*lds+j : (i+1)*lds+j+4 : (i+1)*lds+j+4]
			r2 := src[(i+2)*lds+j : (i+2)*lds+j+4 : (i+2)*lds+j+4]
			r3 := src[(i+3)*lds+j : (i+3)*lds+j+4 : (i+3)*lds+j+4]
			for c := range 4 {
				d := dst[(j+c)*ldd+i : (j+c)*ldd+i+4 : (j+c)*ldd+i+4]
				d[0], d[1], d[2], d[3] = r0[c], r1[c], r2[c], r3[c]
			}
		}
	}
}
