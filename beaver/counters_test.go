package beaver

import (
	"math"
	"strings"
	"testing"
)

func TestReserveMark(t *testing.T) {
	const chunk = 1 << 16
	tests := []struct{ c, want uint64 }{
		{0, chunk},
		{chunk - 1, chunk},
		{chunk, 2 * chunk},
		{1<<40 + 5, 1<<40 + chunk},
		{2<<40 - 1, 2 << 40}, // never past the next multiple of 2^40 (an epoch)
		{math.MaxUint64 - 1, math.MaxUint64},
		{math.MaxUint64 - chunk, math.MaxUint64},
	}
	for _, tc := range tests {
		if got := ReserveMark(tc.c, chunk); got != tc.want || got <= tc.c {
			t.Errorf("ReserveMark(%d, 2^16) = %d, want %d", tc.c, got, tc.want)
		}
	}
	if got := ReserveMark(5, 1<<40); got != 1<<40 {
		t.Errorf("ReserveMark(5, 2^40) = %d, want 2^40", got)
	}
}

// TestCounters: positions are handed out in order, per stream, never
// backwards, and never past the last counter.
func TestCounters(t *testing.T) {
	var c Counters
	for i, want := range []uint64{0, 1, 2} {
		if got, err := c.Take(7, 1); err != nil || got != want {
			t.Fatalf("take %d: %d, %v; want %d", i, got, err, want)
		}
	}
	if got := c.Position(7); got != 3 {
		t.Errorf("position %d, want 3", got)
	}
	if got := c.Position(8); got != 0 {
		t.Errorf("untouched stream at %d, want 0", got)
	}
	if first, err := c.Take(7, 5); err != nil || first != 3 || c.Position(7) != 8 {
		t.Errorf("take 5: %d, %v, position %d; want 3, nil, 8", first, err, c.Position(7))
	}
	if err := c.Seek(7, 100); err != nil || c.Position(7) != 100 {
		t.Errorf("seek forward: %v, position %d", err, c.Position(7))
	}
	if err := c.Seek(7, 100); err != nil {
		t.Errorf("seek to the same position: %v", err)
	}
	if err := c.Seek(7, 99); err == nil || !strings.Contains(err.Error(), "would reuse") || c.Position(7) != 100 {
		t.Errorf("seek backwards: %v, position %d", err, c.Position(7))
	}
	if _, err := c.Take(7, 0); err == nil {
		t.Error("take 0 accepted")
	}
	if err := c.Seek(9, math.MaxUint64-2); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Take(9, 3); err == nil || c.Position(9) != math.MaxUint64-2 {
		t.Errorf("take past the last counter: %v, position %d", err, c.Position(9))
	}
	if first, err := c.Take(9, 2); err != nil || first != math.MaxUint64-2 {
		t.Errorf("take the last two counters: %d, %v", first, err)
	}
	if _, err := c.Take(9, 1); err == nil || !strings.Contains(err.Error(), "exhausted") {
		t.Errorf("take at 2^64−1: %v, want exhausted", err)
	}
}
