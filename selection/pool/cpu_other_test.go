//go:build !unix

package pool

// cpuSeconds is not measured here.
func cpuSeconds() float64 { return 0 }
