// Package syncbuf holds Buffer, a byte buffer that goroutines may write and
// read at once: the log sink and child-process stderr of the module's tests
// and benchmark binaries (a slog handler, a listener's logger or an
// exec.Cmd writes while the test reads).
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer guarded by a mutex: Write and String may be
// called from any goroutines at once. With Max > 0, once it holds more than
// Max bytes it drops further writes (while reporting them written): it keeps
// the head of what was written, in whole writes, enough to diagnose a child
// process without holding all it says. The zero value is an empty buffer
// without a limit.
type Buffer struct {
	// Max is the size past which writes are dropped (0: never).
	Max int

	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p, unless the buffer already holds more than Max bytes, and
// reports all of p written.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Max > 0 && s.b.Len() > s.Max {
		return len(p), nil
	}
	return s.b.Write(p)
}

// String returns what the buffer holds.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
