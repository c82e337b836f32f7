package share

import "testing"

// TestWordClasses checks the scratch words' size classes: a class holds at least the
// words asked for, wastes less than a quarter, maps its own size to itself
// (so PutWords accepts exactly GetWords' buffers), and distinct sizes get
// distinct classes.
func TestWordClasses(t *testing.T) {
	seen := map[int]int{}
	for n := minScratchWords; n < 1<<22; n += 1 + n/7 {
		c, size := wordClass(n)
		if size < n || 4*(size-n) >= size {
			t.Fatalf("n %d: class size %d", n, size)
		}
		if c2, s2 := wordClass(size); c2 != c || s2 != size {
			t.Fatalf("n %d: size %d maps to class %d size %d, not %d", n, size, c2, s2, c)
		}
		if old, ok := seen[c]; ok && old != size {
			t.Fatalf("class %d holds sizes %d and %d", c, old, size)
		}
		seen[c] = size
	}
}

// TestGetPutWords checks GetWords' lengths and capacities, and that PutWords
// ignores slices whose capacity is no class size.
func TestGetPutWords(t *testing.T) {
	for _, n := range []int{0, 1, minScratchWords - 1, minScratchWords, 5000, 1 << 20} {
		w := GetWords(n)
		checkScratchShape(t, "GetWords", n, w)
		for i := range w {
			w[i] = 7
		}
		PutWords(w)
	}
	// A slice whose capacity is no class size is never handed out again.
	odd := make([]uint64, 3000)
	PutWords(odd)
	for range 10 {
		if w := GetWords(3000); &w[0] == &odd[0] {
			t.Fatal("GetWords returned a buffer PutWords should have ignored")
		}
	}
}

// TestGetZeroedWords checks that GetZeroedWords hands out zeros whether the
// buffer is fresh or recycled (its earlier user's words overwritten), with
// GetWords' lengths and class capacities.
func TestGetZeroedWords(t *testing.T) {
	for _, n := range []int{0, 1, minScratchWords - 1, minScratchWords, 5000, 1 << 16} {
		for round := range 3 {
			w := GetZeroedWords(n)
			checkScratchShape(t, "GetZeroedWords", n, w)
			for i, v := range w {
				if v != 0 {
					t.Fatalf("round %d: GetZeroedWords(%d)[%d] = %d", round, n, i, v)
				}
				w[i] = ^uint64(i) // what the next round must not see
			}
			PutWords(w)
			PutWords(GetWords(n)) // a GetWords user's buffer, recycled dirty
		}
	}
}

// checkScratchShape fails t unless w, what get returned for n words, has
// length n and, where n is recycled (≥ minScratchWords), its class's size
// as capacity (which PutWords requires).
func checkScratchShape(t *testing.T, get string, n int, w []uint64) {
	t.Helper()
	if len(w) != n {
		t.Fatalf("%s(%d) has length %d", get, n, len(w))
	}
	if n >= minScratchWords {
		if _, size := wordClass(n); cap(w) != size {
			t.Fatalf("%s(%d) has capacity %d, want the class size %d", get, n, cap(w), size)
		}
	}
}
