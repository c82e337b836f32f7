package pool

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/nn/model"
)

// TestItemsRoundTrip: a pool's canonical bytes are the bytes its file
// stores (an image's pixels as EncodeImages writes them, a text's UTF-8),
// and FromItems makes them into a pool with the same candidates and the
// same model input.
func TestItemsRoundTrip(t *testing.T) {
	imgs := &Images{Width: 3, Height: 2, Channels: 2, Pixels: [][]float64{
		{0, 1, 2.0 / 255, 254.0 / 255, 0.5, 128.0 / 255, 1, 1, 0, 0, 3.0 / 255, 9.0 / 255},
		{1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},
	}}
	var file bytes.Buffer
	if err := EncodeImages(&file, imgs); err != nil {
		t.Fatal(err)
	}
	back, err := Read(&file)
	if err != nil {
		t.Fatal(err)
	}
	var items [][]byte
	for i := range back.Len() {
		b, err := back.AppendItem(nil, i)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, b)
	}
	if items[0][2] != 2 || items[0][4] != 128 || len(items[1]) != 12 {
		t.Fatalf("image items %v", items)
	}
	// The decoder's Raw bytes and the conversion of Pixels agree.
	conv := &Pool{Images: &Images{Width: 3, Height: 2, Channels: 2, Pixels: back.Images.Pixels}}
	for i := range items {
		if b, _ := conv.AppendItem(nil, i); !bytes.Equal(b, items[i]) {
			t.Fatalf("image %d: converted %v, raw %v", i, b, items[i])
		}
	}
	p, err := FromItems(KindImages, 3, 2, items)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := model.NormalizeImages(p.Images.Pixels, 1), model.NormalizeImages(back.Images.Pixels, 1); !equalRows(got.Pixels, want.Pixels) || p.Images.NumChannels() != 2 {
		t.Fatal("images from their items differ from the file's")
	}

	texts := &Pool{Texts: &Texts{Texts: []string{"héllo \"world\"", "line\nbreak"}}}
	b, _ := texts.AppendItem(nil, 0)
	if string(b) != "héllo \"world\"" {
		t.Fatalf("text item %q", b)
	}
	tp, err := FromItems(KindTexts, 0, 0, [][]byte{b})
	if err != nil || tp.Texts.Texts[0] != texts.Texts.Texts[0] {
		t.Fatalf("text from its item: %v %v", tp, err)
	}

	for name, c := range map[string]struct {
		kind  Kind
		w, h  int
		items [][]byte
	}{
		"no items":            {KindImages, 3, 2, nil},
		"image of other size": {KindImages, 3, 2, [][]byte{make([]byte, 6), make([]byte, 7)}},
		"image of 5 channels": {KindImages, 1, 1, [][]byte{make([]byte, 5)}},
		"image of side 0":     {KindImages, 0, 2, [][]byte{{1}}},
		"invalid UTF-8":       {KindTexts, 0, 0, [][]byte{{0xff, 0xfe}}},
		"text beyond a line":  {KindTexts, 0, 0, [][]byte{[]byte(strings.Repeat("a", MaxLineBytes/2+1))}},
		"unknown kind":        {"audio", 0, 0, [][]byte{{1}}},
	} {
		if _, err := FromItems(c.kind, c.w, c.h, c.items); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	bad := &Pool{Images: &Images{Width: 1, Height: 1, Pixels: [][]float64{{1.5}}}}
	if _, err := bad.AppendItem(nil, 0); err == nil {
		t.Error("a pixel outside [0, 1] gives an item")
	}
}

func equalRows(a, b [][]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				return false
			}
		}
	}
	return true
}

// TestRoundByte: roundByte is math.Round on [0, 255], at every half, just
// below and above it, and at the values below a half whose sum with 0.5
// rounds up.
func TestRoundByte(t *testing.T) {
	var xs []float64
	for k := 0; k <= 255; k++ {
		for _, d := range []float64{0, 0.5, 0.25, 0.75} {
			if x := float64(k) + d; x <= 255 {
				xs = append(xs, x, math.Nextafter(x, 0), math.Nextafter(x, 256))
			}
		}
		xs = append(xs, float64(k)/255*255)
	}
	xs = append(xs, 0.5-math.Pow(2, -54), 0.49999999999999994)
	for _, x := range xs {
		if x < 0 || x > 255 {
			continue
		}
		if got, want := roundByte(x), byte(math.Round(x)); got != want {
			t.Fatalf("roundByte(%v) = %d, math.Round gives %d", x, got, want)
		}
	}
}

// FuzzFromItems makes pools of arbitrary items (what a bundle delivers):
// never a panic, and an accepted image pool has items of one size.
func FuzzFromItems(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4}, []byte{5, 6, 7, 8}, uint8(2), true)
	f.Add([]byte("a text"), []byte{0xff}, uint8(0), false)
	f.Fuzz(func(t *testing.T, a, b []byte, side uint8, images bool) {
		kind := KindTexts
		if images {
			kind = KindImages
		}
		p, err := FromItems(kind, int(side), int(side), [][]byte{a, b})
		if err != nil || !images {
			return
		}
		if len(p.Images.Pixels[0]) != len(p.Images.Pixels[1]) {
			t.Fatal("images of two sizes")
		}
	})
}

// BenchmarkAppendItem is the cost of an MNIST image's canonical bytes
// (784 pixels): copied from the Raw bytes a decoded pool keeps, or
// converted from Pixels (a pool built in memory); what the commitment
// adds per candidate of an image pool over BenchmarkCommit's (package
// purchase) given bytes.
func BenchmarkAppendItem(b *testing.B) {
	img, raw := make([]float64, 784), make([]byte, 784)
	for i := range img {
		raw[i] = byte(i)
		img[i] = float64(raw[i]) / 255
	}
	for _, c := range []struct {
		name string
		raw  [][]byte
	}{{"raw", [][]byte{raw}}, {"converted", nil}} {
		b.Run(c.name, func(b *testing.B) {
			p := &Pool{Images: &Images{Width: 28, Height: 28, Pixels: [][]float64{img}, Raw: c.raw}}
			var buf []byte
			c0 := cpuSeconds()
			for b.Loop() {
				buf, _ = p.AppendItem(buf[:0], 0)
			}
			b.ReportMetric((cpuSeconds()-c0)/float64(b.N)*1e9, "cpu-ns/op")
		})
	}
}
