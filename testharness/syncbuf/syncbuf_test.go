package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// TestConcurrentWrites: writes from many goroutines all land, whole, while
// another goroutine reads (run with -race to check the locking).
func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				if n, err := b.Write([]byte("line\n")); n != 5 || err != nil {
					t.Errorf("Write: %d, %v", n, err)
				}
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("line\n", 800) {
		t.Fatalf("%d bytes, want 800 whole lines", len(got))
	}
}

// TestMax: past Max bytes the writes are dropped, whole, and every write is
// reported whole.
func TestMax(t *testing.T) {
	for _, c := range []struct {
		max    int
		writes []string
		want   string
	}{
		{0, []string{"abc", "def"}, "abcdef"},
		{4, []string{"abc", "def", "gh"}, "abcdef"},
		{4, []string{"abcdef", "gh"}, "abcdef"},
		{6, []string{"abc", "def", "g"}, "abcdefg"},
		{6, []string{"abc", "def", "g", "h"}, "abcdefg"},
	} {
		b := Buffer{Max: c.max}
		for _, w := range c.writes {
			if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
				t.Fatalf("Max %d: Write(%q) = %d, %v", c.max, w, n, err)
			}
		}
		if got := b.String(); got != c.want {
			t.Errorf("Max %d, writes %q: %q, want %q", c.max, c.writes, got, c.want)
		}
	}
}
