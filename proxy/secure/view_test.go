package secure

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// chiSquareLimit bounds the chi-square statistic of a uniform byte histogram
// (255 degrees of freedom) with a false-alarm probability below 1e-9, so the
// test cannot flake although the input-sharing seeds are fresh each run;
// structured data scores in the thousands.
const chiSquareLimit = 420

// byteChiSquare returns the chi-square statistic of the byte histogram of
// msgs against the uniform distribution, and the number of bytes.
func byteChiSquare(msgs [][]uint64) (float64, int) {
	var hist [256]float64
	n := 0
	var b [8]byte
	for _, m := range msgs {
		for _, w := range m {
			binary.LittleEndian.PutUint64(b[:], w)
			for _, x := range b {
				hist[x]++
			}
			n += 8
		}
	}
	exp := float64(n) / 256
	chi := 0.0
	for _, h := range hist {
		chi += (h - exp) * (h - exp) / exp
	}
	return chi, n
}

// viewOf runs Prepare and Forward of net on the batch xs and returns every
// word message each party received.
func viewOf(t *testing.T, a Arch, net *Net, xs []float64, mask [][]int, B int, seeds [2]share.Seed) [2][][]uint64 {
	t.Helper()
	var mu sync.Mutex
	var views [2][][]uint64
	_, err := runLocal(context.Background(), localConfig{Seeds: seeds}, func(ctx context.Context, s *protocol.Session) (struct{}, error) {
		p := s.Party()
		s.SetReceiveTap(func(w []uint64) {
			mu.Lock()
			views[p] = append(views[p], append([]uint64(nil), w...))
			mu.Unlock()
		})
		var nw *Net
		in := &Batch{X: xs, Mask: mask}
		if p == 0 {
			nw, in = net, nil
		}
		prep, err := Prepare(ctx, s, a, nw, Options{})
		if err != nil {
			return struct{}{}, err
		}
		_, err = prep.Forward(ctx, s, B, in)
		return struct{}{}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return views
}

// TestViewIndependentOfPeerSecret checks what each party sees during a whole
// secure forward (weight sharing included): the data owner's received bytes
// are uniform for two very different proxies, and the model owner's for two
// very different batches of candidates, so the messages carry no information
// about the other party's secret; and no clear input word crosses the wire.
func TestViewIndependentOfPeerSecret(t *testing.T) {
	a := Arch{Family: model.BERT, Layers: 2, Heads: 3, HeadDim: 4, Hidden: 12, Seq: 8, Labels: 3, MLPHidden: 5}
	const B = 8
	mask := make([][]int, B)
	for i := range mask {
		mask[i] = make([]int, a.Seq)
		for j := 0; j < 2+i%(a.Seq-1); j++ {
			mask[i][j] = 1
		}
	}
	gauss := make([]float64, B*a.Seq*a.Hidden)
	rng := rand.New(rand.NewPCG(5, 5))
	for i := range gauss {
		gauss[i] = rng.NormFloat64()
	}
	constant := make([]float64, len(gauss)) // every candidate the same, every value 0.5
	for i := range constant {
		constant[i] = 0.5
	}
	random, err := RandomNet(a, 1)
	if err != nil {
		t.Fatal(err)
	}
	zeroed, err := RandomNet(a, 2) // attention and output weights all zero
	if err != nil {
		t.Fatal(err)
	}
	for i := range zeroed.blocks {
		clear(zeroed.blocks[i].qkv.w)
		clear(zeroed.blocks[i].o.w)
	}
	clear(zeroed.cls.w)
	enc := make(map[uint64]bool) // the clear words of the data owner's inputs
	for _, x := range append(append([]float64(nil), gauss...), constant...) {
		w, err := share.DefaultFixedPoint.Encode(x)
		if err != nil {
			t.Fatal(err)
		}
		enc[w] = true
	}
	for _, c := range []struct {
		name string
		net  *Net
		xs   []float64
	}{
		{"random proxy, gaussian inputs", random, gauss},
		{"random proxy, constant inputs", random, constant},
		{"zeroed proxy, gaussian inputs", zeroed, gauss},
	} {
		t.Run(c.name, func(t *testing.T) {
			views := viewOf(t, a, c.net, c.xs, mask, B, [2]share.Seed{{1}, {2}})
			for p, v := range views {
				chi, n := byteChiSquare(v)
				t.Logf("party %d received %d messages, %d bytes: chi-square %.1f", p, len(v), n, chi)
				if n < 1<<14 {
					t.Fatalf("party %d received only %d bytes: the view is too small to judge", p, n)
				}
				if chi > chiSquareLimit {
					t.Errorf("party %d's view is not uniform: chi-square %.1f > %d", p, chi, chiSquareLimit)
				}
			}
			clearWords := 0
			for _, m := range views[0] {
				for _, w := range m {
					if enc[w] {
						clearWords++
					}
				}
			}
			if clearWords > 0 {
				t.Errorf("the model owner received %d words equal to the data owner's clear inputs", clearWords)
			}
		})
	}
}
