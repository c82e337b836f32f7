package memlimit

import (
	"runtime/debug"
	"testing"
	"time"
)

func TestLimit(t *testing.T) {
	for _, c := range []struct {
		name               string
		target, live, want int64
	}{
		{"live well below the target", 4 << 30, 1 << 30, 4 << 30},
		{"live at thirty-two thirty-thirds of the target", 33 << 30, 32 << 30, 33 << 30},
		{"live above the target: a thirty-second more", 4 << 30, 8 << 30, 8<<30 + 256<<20},
		{"no live heap", 1 << 30, 0, 1 << 30},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Limit(c.target, c.live); got != c.want {
				t.Fatalf("Limit(%d, %d) = %d, want %d", c.target, c.live, got, c.want)
			}
		})
	}
}

func TestStartStop(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetMemoryLimit(-1)
	stop := Start(64<<30, time.Millisecond)
	if got := debug.SetMemoryLimit(-1); got < 64<<30 {
		t.Fatalf("limit %d after Start(64 GiB), want ≥ 64 GiB", got)
	}
	time.Sleep(5 * time.Millisecond)
	stop()
	stop() // idempotent
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Fatalf("limit %d after stop, want the one before, %d", got, before)
	}
}

func TestStartRespectsGOMEMLIMIT(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "1GiB")
	before := debug.SetMemoryLimit(-1)
	stop := Start(64<<30, time.Millisecond)
	defer stop()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Fatalf("limit %d with GOMEMLIMIT set, want it unchanged (%d)", got, before)
	}
}
