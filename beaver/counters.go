package beaver

import (
	"fmt"
	"math"
	"sync"
)

// MaxSessionStreams bounds the streams of one session: a dealer refuses a
// request on one more, and a party's high-water marks keep no more.
const MaxSessionStreams = 1 << 16

// Counters are a provider's stream positions: per stream, the counter of
// the next item, handed out in order (Take) and never moved backwards
// (Seek), so that no position is drawn twice by one provider. A provider
// embeds Counters for its Position and Seek. The zero value is ready to
// use; it is safe for concurrent use.
type Counters struct {
	mu  sync.Mutex
	pos map[uint32]uint64
}

// Position returns the counter of the next item on stream (Provider.Position).
func (c *Counters) Position(stream uint32) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pos[stream]
}

// Seek moves stream's counter to pos (Provider.Seek). Moving it backwards
// would hand out positions already drawn, so it is an error.
func (c *Counters) Seek(stream uint32, pos uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur := c.pos[stream]; pos < cur {
		return fmt.Errorf("beaver: seek stream %d back from %d to %d would reuse correlated randomness", stream, cur, pos)
	}
	c.set(stream, pos)
	return nil
}

// Take hands out the next n counters of stream (n ≥ 1) and returns the
// first; the stream then stands past them. When fewer than n counters are
// left below 2^64−1 it hands out none and returns an error.
func (c *Counters) Take(stream uint32, n int) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := c.pos[stream]
	if n < 1 || uint64(n) > math.MaxUint64-first {
		return 0, fmt.Errorf("counter space of stream %d exhausted", stream)
	}
	c.set(stream, first+uint64(n))
	return first, nil
}

// set records stream's position; c.mu is held.
func (c *Counters) set(stream uint32, pos uint64) {
	if c.pos == nil {
		c.pos = map[uint32]uint64{}
	}
	c.pos[stream] = pos
}

// ReserveMark returns the persisted high-water mark that covers position
// pos: pos+1 rounded up to a multiple of chunk (a power of two), saturating
// at 2^64−1. Marks persisted this way are written once per chunk, not once
// per item, and never cross a multiple of chunk that a resumed run jumps
// to (the dealer's state file and the parties' marks both use it).
func ReserveMark(pos, chunk uint64) uint64 {
	if pos >= math.MaxUint64-chunk {
		return math.MaxUint64
	}
	return (pos + chunk) &^ (chunk - 1)
}
