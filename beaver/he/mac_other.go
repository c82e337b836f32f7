//go:build purego || !amd64

package he

// haveMacAVX2 is false without amd64 assembly.
const haveMacAVX2 = false

// haveMacAVX512 is false without amd64 assembly.
const haveMacAVX512 = false

// macLimbsAsm is never called where haveMacAVX2 is false.
func macLimbsAsm(terms []macTerm, idx []uint16, limbs []uint64, g, run int) {
	panic("he: macLimbsAsm without AVX2")
}

// maskBelowAVX512 is never called where haveMacAVX512 is false.
func maskBelowAVX512(c *uint64, n int, mask, q uint64) bool {
	panic("he: maskBelowAVX512 without AVX-512")
}

// haveNormalizeAVX512 is false without amd64 assembly.
const haveNormalizeAVX512 = false

// normalizeLimbsAVX512 is never called where haveNormalizeAVX512 is false.
func normalizeLimbsAVX512(limbs *uint64, n int, q uint64, qinv float64) {
	panic("he: normalizeLimbsAVX512 without AVX-512")
}
