//go:build !unix

package bench

import "time"

// processCPU returns 0 where getrusage is not available.
func processCPU() time.Duration { return 0 }

// ProcessCPUSeconds returns 0 where getrusage is not available.
func ProcessCPUSeconds() float64 { return 0 }
