//go:build purego || !(amd64 || arm64)

package share

// archKernels lists no kernels beyond the generic one.
func archKernels() []ringKernel { return nil }
