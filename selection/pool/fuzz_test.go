package pool

import (
	"bytes"
	"testing"
)

// checkPool fails unless p is internally consistent and re-encodes.
func checkImages(t *testing.T, s *Images) {
	t.Helper()
	if len(s.Pixels) != len(s.Labels) {
		t.Fatalf("%d images, %d labels", len(s.Pixels), len(s.Labels))
	}
	for _, img := range s.Pixels {
		if len(img) != s.NumChannels()*s.Width*s.Height {
			t.Fatalf("image of %d pixels for %d×%d×%d", len(img), s.NumChannels(), s.Width, s.Height)
		}
	}
	if err := EncodeImages(&bytes.Buffer{}, s); err != nil {
		t.Fatalf("re-encoding: %v", err)
	}
}

func checkTexts(t *testing.T, s *Texts) {
	t.Helper()
	if s.Labelled() {
		if len(s.Texts) != len(s.Labels) {
			t.Fatalf("%d texts, %d labels", len(s.Texts), len(s.Labels))
		}
		for i, l := range s.Labels {
			if l < 0 || l >= len(s.ClassNames) {
				t.Fatalf("text %d: label %d out of range", i, l)
			}
		}
	} else if s.Labels != nil {
		t.Fatalf("unlabeled set with labels %v", s.Labels)
	}
	var buf bytes.Buffer
	if err := EncodeTexts(&buf, s); err != nil {
		t.Fatalf("re-encoding: %v", err)
	}
	again, err := DecodeTexts(&buf)
	if err != nil || len(again.Texts) != len(s.Texts) {
		t.Fatalf("re-decoding: %d texts, %v", len(again.Texts), err)
	}
}

func seedImages(f *testing.F) {
	var buf bytes.Buffer
	_ = EncodeImages(&buf, &Images{Width: 2, Height: 2, Pixels: [][]float64{{0, 1, 0.5, 0}}, Labels: []int{3}})
	f.Add(buf.Bytes())
	f.Add(gz(f, imagesHeader(1000, 28, 28)))
	buf.Reset()
	_ = EncodeImages(&buf, &Images{Width: 1, Height: 2, Channels: 3, Pixels: [][]float64{{0, 1, 0.5, 0, 0.2, 0.3}}})
	f.Add(buf.Bytes())
	f.Add(append([]byte(ImagesMagicChannels), 1, 0, 0, 0, 1, 0, 1, 0, 2, 0, 0, 9, 9))
	f.Add(append(imagesHeader(1, 1, 2), 0, 7, 9))
	f.Add([]byte{})
}

func seedTexts(f *testing.F) {
	var buf bytes.Buffer
	_ = EncodeTexts(&buf, &Texts{Texts: []string{"a", "b"}, Labels: []int{0, 1}, ClassNames: []string{"ham", "spam"}})
	f.Add(buf.Bytes())
	f.Add(gz(f, []byte(`{"format":"selectformer-texts/1","class_names":["x"]}`+"\n"+`{"label":0,"text":"t"}`)))
	f.Add([]byte(`{"format":"selectformer-texts/1"}` + "\n" + `{"text":"t"}` + "\n\n" + `{"text":"\u00e9\ud800"}`))
}

func FuzzDecodeImages(f *testing.F) {
	seedImages(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if s, err := DecodeImages(bytes.NewReader(data)); err == nil {
			checkImages(t, s)
		}
	})
}

func FuzzDecodeTexts(f *testing.F) {
	seedTexts(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if s, err := DecodeTexts(bytes.NewReader(data)); err == nil {
			checkTexts(t, s)
		}
	})
}

func FuzzRead(f *testing.F) {
	seedImages(f)
	seedTexts(f)
	f.Add([]byte("\xef\xbb\xbf {"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		if (p.Images == nil) == (p.Texts == nil) || p.Len() == 0 {
			t.Fatalf("pool %+v", p)
		}
		if p.Images != nil {
			checkImages(t, p.Images)
		} else {
			checkTexts(t, p.Texts)
		}
	})
}

func FuzzParseLabels(f *testing.F) {
	f.Add([]byte("0\n1\n# c\nspam\n"), 3)
	f.Add([]byte("ham\r\n\n-0\n"), 2)
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		n = 1 + (n&0xff)%8
		classes := []string{"ham", "spam", "0", "", "x y", "ünï", "#", "7"}[:n]
		l, err := ParseLabels(data, classes)
		if err != nil {
			return
		}
		if len(l) == 0 {
			t.Fatal("no labels and no error")
		}
		for _, v := range l {
			if v < 0 || v >= n {
				t.Fatalf("label %d outside [0, %d)", v, n)
			}
		}
	})
}
