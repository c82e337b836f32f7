// Package cudadrv holds the cgo side of share's cuda backend (build tag
// cuda): the CUDA driver calls gorgonia.org/cu does not wrap (page-locked
// host memory, error texts), device pointers in the form
// gorgonia.org/cu/blas takes, and a cuInit shim that lets a cuda build start
// on a host without a device. It lives apart from package share because a
// package that uses cgo cannot also hold Go assembly (share's AVX-512
// kernel). Without the cuda tag the package is empty.
package cudadrv
