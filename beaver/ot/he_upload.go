package ot

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/he"
)

// The uploads of a Lattice: party 0's encryptions of its weight matrices
// travel on the session stream (the provider's base stream, idle once
// BindSession's setup is done), served by two goroutines per party that
// wait on nothing but each other, never on an item's stream. So an item
// never waits on another stream's protocol (see the invariant in he.go).
//
// Messages on the session stream after the setup, each of fixed length
// (the encryption's chunks excepted, whose sizes follow from the key):
//
//   - party 1 → party 0, a request: heRequest and the key (heKeyWords
//     words: matrix, kind, weight id, k, n, row0, row1, offset, NW, KW), the
//     first time one of its items needs the key. At most once per key per
//     session.
//   - party 0 → party 1, a reply: heUpload, 0 and the key, then the
//     encryption (he.WeightSizes bytes, in messages of at most heChunkWords
//     words); or heRefused, a reason (heRefuse*) and the key, after which
//     party 0 serves no more.
//
// Party 0 serves a key once it is both requested and needed by one of its
// own items (which registers it, with what makes it, as the item starts):
// a request for a key no item of party 0 needed yet waits (at most
// heMaxPending of them), so party 1 cannot make it encrypt anything its
// own items would not use. Party 1's item that needs a key waits for
// the reply to the request, which comes at the latest once party 0's
// half of the same item has started.

// Words of the session stream's messages.
const (
	heRequest uint64 = 0x4845_5245_5155 // "HEREQU": party 1 asks for an encryption
	heUpload  uint64 = 0x4845_5550_4c44 // "HEUPLD": party 0 sends it
	heRefused uint64 = 0x4845_5245_4655 // "HEREFU": party 0 refuses, and stops serving
)

// heKeyWords is the size of a key on the wire, heRequestWords of a
// request and heReplyWords of a reply's header.
const (
	heKeyWords     = 10
	heRequestWords = 1 + heKeyWords
	heReplyWords   = 2 + heKeyWords
)

// heMaxPending bounds the requests party 0 holds for keys none of its items
// needed yet: an honest party 1 asks only for its items' keys, of which a
// selection phase has a few dozen.
const heMaxPending = 1 << 12

// Reasons of a refusal (the second word of a heRefused reply), in public
// words for the peer.
const (
	heRefuseResent     uint64 = 1 // the key was asked for before
	heRefuseTooMany    uint64 = 2 // more than heMaxPending requests wait
	heRefuseMalformed  uint64 = 3 // the request is not one
	heRefuseCheckEnded uint64 = 4 // a failed check ended party 0's key
)

// heRefusal names a refusal's reason.
func heRefusal(code uint64) string {
	switch code {
	case heRefuseResent:
		return "asked again for an encryption it was sent"
	case heRefuseTooMany:
		return fmt.Sprintf("more than %d requests for encryptions no item needed", heMaxPending)
	case heRefuseMalformed:
		return "malformed request"
	case heRefuseCheckEnded:
		return "a failed check ended the HE key"
	}
	return fmt.Sprintf("reason %d", code)
}

// words encodes key.
func (key heKey) words() []uint64 {
	return []uint64{uint64(key.matrix), uint64(key.kind), key.id, uint64(key.k), uint64(key.n),
		uint64(key.row0), uint64(key.row1), uint64(key.off), uint64(key.nw), uint64(key.kw)}
}

// decodeKey decodes a key (heKeyWords words), refusing fields out of their
// types' range; it says nothing of whether the key is any item's.
func decodeKey(w []uint64) (heKey, error) {
	if len(w) != heKeyWords {
		return heKey{}, fmt.Errorf("key of %d words: %w", len(w), he.ErrMalformed)
	}
	if w[0] > math.MaxUint8 || w[1] > math.MaxUint8 {
		return heKey{}, fmt.Errorf("key matrix %d, kind %d: %w", w[0], w[1], he.ErrMalformed)
	}
	var ints [7]int
	for i, v := range w[3:] {
		if v > math.MaxInt32 {
			return heKey{}, fmt.Errorf("key field %d is %d: %w", 3+i, v, he.ErrMalformed)
		}
		ints[i] = int(v)
	}
	return heKey{matrix: he.Matrix(w[0]), kind: beaver.Kind(w[1]), id: w[2], k: ints[0], n: ints[1],
		row0: ints[2], row1: ints[3], off: ints[4], nw: ints[5], kw: ints[6]}, nil
}

// heMaker makes the encryption of a key party 0 needs: the item and term
// that registered it first, and the item's weight masks.
type heMaker struct {
	sid  beaver.SessionID
	it   *heItem
	t    heTerm
	mask func(k, n int) []uint64
}

// startUploads starts the upload service of party on the session stream c
// (Setup, once): its goroutines run until the connection fails or the
// service does (failUploads).
func (h *Lattice) startUploads(ctx context.Context, c Conn, party int) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.mu.Lock()
	h.upStop = cancel
	h.mu.Unlock()
	if party == 0 {
		go h.readRequests(ctx, c)
		go h.sendUploads(ctx, c)
	} else {
		go h.sendRequests(ctx, c)
		go h.readReplies(ctx, c)
	}
}

// failUploads ends the upload service with err (the first failure stays):
// every item waiting for an encryption, and every later one, fails with it.
func (h *Lattice) failUploads(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failUploadsLocked(err)
}

// failUploadsLocked is failUploads with h.mu held.
func (h *Lattice) failUploadsLocked(err error) {
	if h.upErr != nil {
		return
	}
	h.upErr = fmt.Errorf("he uploads: %w", err)
	h.failUp(h.upErr)
	if h.upStop != nil {
		h.upStop()
	}
	for _, e := range h.cache {
		if e.pending {
			e.pending, e.err = false, h.upErr
			close(e.done)
		}
	}
}

// wakeUp wakes the service's sender.
func (h *Lattice) wakeUp() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// next waits for the sender's next message: a queued key (code 0), or
// party 0's refusal (its code and key), once; ok is false once the service
// has failed with nothing more to send.
func (h *Lattice) next() (key heKey, code uint64, ok bool) {
	for {
		h.mu.Lock()
		switch {
		case h.refusal != 0:
			key, code, h.refusal = h.refused, h.refusal, 0
			h.mu.Unlock()
			return key, code, true
		case h.upErr != nil:
			h.mu.Unlock()
			return heKey{}, 0, false
		case len(h.queue) > 0:
			key, h.queue = h.queue[0], h.queue[1:]
			h.mu.Unlock()
			return key, 0, true
		}
		h.mu.Unlock()
		select {
		case <-h.wake:
		case <-h.upFailed.Done():
		}
	}
}

// refuse sends party 0's refusal: the service has failed (its context is
// cancelled), so it gets a few seconds of its own.
func refuse(ctx context.Context, c Conn, code uint64, key heKey) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = c.SendWords(ctx, append([]uint64{heRefused, code}, key.words()...))
}

// need registers the keys of party 0's item it, with what makes them: a
// key party 1 asked for is queued for upload. Called as the item starts,
// before it waits for anything.
func (h *Lattice) need(sid beaver.SessionID, it *heItem, mask func(k, n int) []uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	woke := false
	for _, t := range it.terms {
		if _, ok := h.made[t.key]; ok {
			continue
		}
		h.made[t.key] = heMaker{sid: sid, it: it, t: t, mask: mask}
		if h.asked[t.key] && !h.sent[t.key] {
			h.queue = append(h.queue, t.key)
			h.pending--
			woke = true
		}
	}
	if woke {
		h.wakeUp()
	}
}

// readRequests is party 0's receiver: it queues each request whose key an
// item needed and holds the others (at most heMaxPending) until one does;
// a request for a key asked before, or a malformed one, is refused.
func (h *Lattice) readRequests(ctx context.Context, c Conn) {
	for {
		w := make([]uint64, heRequestWords)
		if err := c.RecvWords(ctx, w); err != nil {
			h.failUploads(fmt.Errorf("receive a request: %w", err))
			return
		}
		if !h.request(w) {
			return
		}
	}
}

// request handles one request (heRequestWords words) and reports whether
// party 0 serves on.
func (h *Lattice) request(w []uint64) bool {
	key, err := decodeKey(w[1:])
	h.mu.Lock()
	defer h.mu.Unlock()
	deny := func(code uint64, err error) bool {
		h.refusal, h.refused = code, key // the sender sends it (refuse)
		h.failUploadsLocked(err)
		return false
	}
	switch {
	case h.upErr != nil:
		return false
	case w[0] != heRequest || err != nil:
		return deny(heRefuseMalformed, fmt.Errorf("malformed request from the peer (%#x): %w", w[0], he.ErrMalformed))
	case h.asked[key]:
		return deny(heRefuseResent, fmt.Errorf("%v: %w", key, ErrWeightResent))
	}
	if _, ok := h.made[key]; ok {
		h.asked[key] = true
		h.queue = append(h.queue, key)
		h.wakeUp()
		return true
	}
	if h.pending >= heMaxPending {
		return deny(heRefuseTooMany, fmt.Errorf("the peer asked for more than %d encryptions no item needed", heMaxPending))
	}
	h.asked[key] = true
	h.pending++
	return true
}

// sendUploads is party 0's sender: it encrypts and sends each queued key,
// or the refusal that ends the service.
func (h *Lattice) sendUploads(ctx context.Context, c Conn) {
	for {
		key, code, ok := h.next()
		switch {
		case !ok:
			return
		case code != 0:
			refuse(ctx, c, code, key)
			return
		}
		if err := h.upload(ctx, c, key); err != nil {
			h.mu.Lock()
			if h.sk == nil && h.refusal == 0 {
				h.refusal, h.refused = heRefuseCheckEnded, key
			}
			h.failUploadsLocked(fmt.Errorf("upload %v: %w", key, err))
			h.mu.Unlock()
		}
	}
}

// upload encrypts the matrix of key (from its maker's weight mask B and
// projection V) and sends it: a reply header, then the chunks.
func (h *Lattice) upload(ctx context.Context, c Conn, key heKey) error {
	h.mu.Lock()
	mk, sk := h.made[key], h.sk
	h.sent[key] = true
	h.mu.Unlock()
	if sk == nil {
		return fmt.Errorf("the HE key was discarded after a failed check: %w", h.err())
	}
	it, t := mk.it, mk.t
	W, err := it.plan.Matrix(t.t, it.weightMask(mk.mask), h.projection(it.n))
	if err != nil {
		return err
	}
	size := h.sc.WeightSizes(t.rows, t.cols, t.t.Off, t.l).Bytes
	h.count(key, size, nil) // before it can arrive: counts read after an item are final
	if err := c.SendWords(ctx, append([]uint64{heUpload, 0}, key.words()...)); err != nil {
		return err
	}
	// Encrypted and sent a group of ciphertexts at a time, in messages of
	// heChunkWords words: party 0 holds one message and one group, not the
	// matrix (its peak memory otherwise grew by twice the largest upload).
	cw := &chunkWriter{ctx: ctx, c: c, size: size, left: size}
	n, err := h.sc.WriteEncryptedWeights(cw, sk, W, t.rows, t.cols, t.t.Off, t.l, seedFor(mk.sid, &t.key), h.rnd)
	if err == nil {
		err = cw.close()
	}
	if err == nil && n != size {
		err = fmt.Errorf("%d bytes, want %d", n, size)
	}
	return err
}

// ask queues party 1's requests for keys (whose entries it just made).
func (h *Lattice) ask(keys []heKey) {
	if len(keys) == 0 {
		return
	}
	h.mu.Lock()
	h.queue = append(h.queue, keys...)
	h.mu.Unlock()
	h.wakeUp()
}

// sendRequests is party 1's sender: it sends each queued request.
func (h *Lattice) sendRequests(ctx context.Context, c Conn) {
	for {
		key, _, ok := h.next()
		if !ok {
			return
		}
		if err := c.SendWords(ctx, append([]uint64{heRequest}, key.words()...)); err != nil {
			h.failUploads(fmt.Errorf("send a request for %v: %w", key, err))
			return
		}
	}
}

// readReplies is party 1's receiver: it receives each encryption it asked
// for, checks and loads it (he.Scheme.LoadWeights) and hands it to the
// items waiting for it; a refusal, a malformed reply or an encryption it
// did not ask for ends the service.
func (h *Lattice) readReplies(ctx context.Context, c Conn) {
	if err := h.replies(ctx, c); err != nil {
		h.failUploads(err)
	}
}

// replies receives replies until one fails.
func (h *Lattice) replies(ctx context.Context, c Conn) error {
	for {
		w := make([]uint64, heReplyWords)
		if err := c.RecvWords(ctx, w); err != nil {
			return fmt.Errorf("receive a reply: %w", err)
		}
		key, err := decodeKey(w[2:])
		switch {
		case w[0] == heRefused:
			return fmt.Errorf("the model owner refused %v: %s", key, heRefusal(w[1]))
		case w[0] != heUpload || w[1] != 0 || err != nil:
			return fmt.Errorf("malformed reply (%#x, %#x): %w", w[0], w[1], errors.Join(he.ErrMalformed, err))
		}
		h.mu.Lock()
		e := h.cache[key]
		ok := e != nil && e.pending && !e.arrived
		if ok {
			e.arrived = true
		}
		h.mu.Unlock()
		if !ok {
			return fmt.Errorf("the model owner sent %v, which was not asked for: %w", key, he.ErrMalformed)
		}
		wts, err := h.load(ctx, c, e.sid, e.term)
		h.mu.Lock()
		if e.pending { // else the service failed meanwhile, and closed it
			e.pending, e.w, e.err = false, wts, err
			close(e.done)
		}
		h.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// load receives party 0's encryption of term t and loads it.
func (h *Lattice) load(ctx context.Context, c Conn, sid beaver.SessionID, t heTerm) (*he.Weights, error) {
	size := h.sc.WeightSizes(t.rows, t.cols, t.t.Off, t.l).Bytes
	// Decoded as it arrives: one message of the encryption held at a
	// time, not the whole (up to 0.7 GB at sst2's defaults).
	ew, err := h.sc.DecodeEncryptedWeightsFrom(&chunkReader{ctx: ctx, c: c, left: size}, size, t.rows, t.cols)
	if err != nil {
		return nil, fmt.Errorf("receive %v: %w", t.key, err)
	}
	// The packing is the key's (NW, KW); MW, the rows of A per block, is
	// the encrypting item's, and each item multiplies with its own.
	if ew.K != t.rows || ew.N != t.cols || ew.Off != t.t.Off || ew.Layout.NW != t.l.NW || max(ew.Layout.KW, 1) != max(t.l.KW, 1) {
		return nil, fmt.Errorf("%v: %d×%d at column %d, layout %v; want %d×%d at %d, NW %d, KW %d", t.key, ew.K, ew.N, ew.Off, ew.Layout, t.rows, t.cols, t.t.Off, t.l.NW, max(t.l.KW, 1))
	}
	if ew.Seed != seedFor(sid, &t.key) {
		return nil, fmt.Errorf("%v: its seed is not the one derived from the session id: %w", t.key, he.ErrMalformed)
	}
	load := h.sc.LoadWeights
	if h.compact {
		load = h.sc.LoadWeightsCompact
	}
	w, err := load(h.pk, ew)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", t.key, err)
	}
	h.count(t.key, size, w)
	return w, nil
}
