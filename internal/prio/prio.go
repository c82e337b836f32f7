// Package prio provides a counting semaphore whose waiters are served by
// priority (lowest number first, first come first served among equals).
package prio

import (
	"container/heap"
	"context"
	"sync"
)

// Gate is a counting semaphore served by priority. The zero value is not
// usable; make one with NewGate.
type Gate struct {
	mu   sync.Mutex
	free int
	seq  uint64
	q    waitQueue
}

// NewGate returns a gate with n slots (at least 1).
func NewGate(n int) *Gate { return &Gate{free: max(n, 1)} }

type waiter struct {
	prio    int64
	seq     uint64
	ch      chan struct{}
	granted bool
	index   int
}

type waitQueue []*waiter

func (q waitQueue) Len() int { return len(q) }
func (q waitQueue) Less(i, j int) bool {
	if q[i].prio != q[j].prio {
		return q[i].prio < q[j].prio
	}
	return q[i].seq < q[j].seq
}
func (q waitQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i]; q[i].index = i; q[j].index = j }
func (q *waitQueue) Push(x any)   { w := x.(*waiter); w.index = len(*q); *q = append(*q, w) }
func (q *waitQueue) Pop() any {
	old := *q
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	w.index = -1
	return w
}

// Acquire takes a slot, waiting while none is free; waiters get freed
// slots lowest priority number first. It returns ctx's error if ctx ends
// first, or errDone if done is closed first, holding nothing.
func (g *Gate) Acquire(ctx context.Context, prio int64, done <-chan struct{}) error {
	g.mu.Lock()
	if g.free > 0 && len(g.q) == 0 {
		g.free--
		g.mu.Unlock()
		return nil
	}
	w := &waiter{prio: prio, seq: g.seq, ch: make(chan struct{})}
	g.seq++
	heap.Push(&g.q, w)
	g.mu.Unlock()
	var err error
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-done:
		err = ErrDone
	}
	g.mu.Lock()
	if w.granted {
		g.mu.Unlock()
		g.Release()
	} else {
		heap.Remove(&g.q, w.index)
		g.mu.Unlock()
	}
	return err
}

// ErrDone is Acquire's error when its done channel closed first.
var ErrDone = doneError{}

type doneError struct{}

func (doneError) Error() string { return "prio: gate wait abandoned" }

// Waiting returns the number of callers waiting in Acquire.
func (g *Gate) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.q)
}

// Release returns a slot, handing it to the first waiter if any.
func (g *Gate) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.q) > 0 {
		w := heap.Pop(&g.q).(*waiter)
		w.granted = true
		close(w.ch)
		return
	}
	g.free++
}
