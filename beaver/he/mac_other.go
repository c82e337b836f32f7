//go:build purego || !amd64

package he

// haveMacAVX2 is false without amd64 assembly.
const haveMacAVX2 = false

// haveMacAVX512 is false without amd64 assembly.
const haveMacAVX512 = false

// macLimbsAsm is never called where haveMacAVX2 is false.
func macLimbsAsm(terms []macTerm, idx []uint16, limbs []uint64, g int) {
	panic("he: macLimbsAsm without AVX2")
}
