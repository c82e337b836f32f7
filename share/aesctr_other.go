//go:build purego || !amd64

package share

// ctrPath is crypto/aes where there is no assembly implementation.
var ctrPath = ctrStd

// ctrPaths lists the one key-stream implementation compiled in.
func ctrPaths() []int { return []int{ctrStd} }

func ctrVAES(rk *[240]byte, rounds int, dst *byte, groups int, hi, lo uint64) {
	panic("share: ctrVAES without assembly")
}

func ctrVAES256(rk2 *[480]byte, rounds int, dst *byte, groups int, hi, lo uint64) {
	panic("share: ctrVAES256 without assembly")
}
