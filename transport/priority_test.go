package transport

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/internal/prio"
)

// frameLog is an underlying connection that records the stream of every
// frame header written to it.
type frameLog struct {
	net.Conn
	mu      sync.Mutex
	streams []uint32
}

func (f *frameLog) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(p) >= headerSize {
		h, err := decodeHeader(p[:headerSize], 1<<30)
		if err == nil {
			f.streams = append(f.streams, h.stream)
		}
	}
	return len(p), nil
}

func TestFramesServedByStreamPriority(t *testing.T) {
	// With the connection busy, frames of several streams wait for it;
	// when it frees, the stream with the lowest priority number goes first,
	// whatever the order in which they started waiting.
	log := &frameLog{}
	c := &Conn{streams: make(map[uint32]*Stream), dead: make(chan struct{}), wtok: prio.NewGate(1), nc: log, raw: log}
	c.opt, _ = Options{}.normalize()
	c.chunk = c.opt.MaxFrame
	ctx := context.Background()
	if err := c.wtok.Acquire(ctx, 0, nil); err != nil { // the connection is busy
		t.Fatal(err)
	}
	order := []struct {
		id   uint32
		prio int64
	}{{11, 9}, {12, 2}, {13, 5}}
	var wg sync.WaitGroup
	for i, o := range order {
		s := c.Stream(o.id)
		s.SetPriority(o.prio)
		s.credit = 1 << 20
		wg.Go(func() {
			if err := s.SendBytes(ctx, []byte("x")); err != nil {
				t.Error(err)
			}
		})
		deadline := time.Now().Add(10 * time.Second)
		for c.wtok.Waiting() != i+1 {
			if time.Now().After(deadline) {
				t.Fatal("sender did not start waiting")
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	c.wtok.Release()
	wg.Wait()
	want := []uint32{12, 13, 11}
	if len(log.streams) != len(want) {
		t.Fatalf("frames of streams %v, want %v", log.streams, want)
	}
	for i := range want {
		if log.streams[i] != want[i] {
			t.Fatalf("frames of streams %v, want %v (lowest priority number first)", log.streams, want)
		}
	}
}
