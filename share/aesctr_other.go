//go:build purego || !amd64

package share

// useVAES is false where there is no assembly implementation.
var useVAES = false

func ctrVAES(rk *[176]byte, dst *byte, groups int, hi, lo uint64) {
	panic("share: ctrVAES without assembly")
}
