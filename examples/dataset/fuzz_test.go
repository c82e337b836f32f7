package dataset

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzDecodeImages(f *testing.F) {
	var buf bytes.Buffer
	_ = EncodeImages(&buf, &ImageSet{Width: 2, Height: 2, Images: [][]float64{{0, 1, 0.5, 0}}, Labels: []int{3}})
	f.Add(buf.Bytes())
	f.Add(gz(f, imagesHeader(1000, 28, 28)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeImages(bytes.NewReader(data))
		if err != nil {
			return
		}
		if len(s.Images) != len(s.Labels) {
			t.Fatalf("%d images, %d labels", len(s.Images), len(s.Labels))
		}
		for _, img := range s.Images {
			if len(img) != s.Width*s.Height {
				t.Fatalf("image of %d pixels for %d×%d", len(img), s.Width, s.Height)
			}
		}
		var out bytes.Buffer
		if err := EncodeImages(&out, s); err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
	})
}

func FuzzDecodeTexts(f *testing.F) {
	var buf bytes.Buffer
	_ = EncodeTexts(&buf, &TextSet{Texts: []string{"a", "b"}, Labels: []int{0, 1}, ClassNames: []string{"ham", "spam"}})
	f.Add(buf.Bytes())
	f.Add(gz(f, []byte(`{"format":"selectformer-texts/1","class_names":["x"]}`+"\n"+`{"label":0,"text":"t"}`)))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeTexts(bytes.NewReader(data))
		if err != nil {
			return
		}
		for i, l := range s.Labels {
			if l < 0 || l >= len(s.ClassNames) {
				t.Fatalf("text %d: label %d out of range", i, l)
			}
		}
		if len(s.Texts) != len(s.Labels) {
			t.Fatalf("%d texts, %d labels", len(s.Texts), len(s.Labels))
		}
	})
}

func FuzzParseMNISTDigits(f *testing.F) {
	f.Add([]byte(`{"data":[]}`))
	f.Add([]byte(`{"data":[` + strings.Repeat("0.5,", 783) + `1]}`))
	f.Add([]byte(`{"data":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		imgs, err := parseMNISTDigits(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, img := range imgs {
			if len(img) != 784 {
				t.Fatalf("image of %d pixels", len(img))
			}
			for _, p := range img {
				if !(p >= 0 && p <= 1) {
					t.Fatalf("pixel %v", p)
				}
			}
		}
	})
}

func FuzzParseSpamMessage(f *testing.F) {
	f.Add([]byte(`{"id":"00001","group":"spam-1","checksum":{"type":"MD5","value":"x"},"text":"Subject: a\n\nb"}`))
	f.Add([]byte(`{"id":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseSpamMessage(data)
		if err == nil && m.Group == "" {
			t.Fatal("accepted a message without group")
		}
	})
}

func FuzzMessageText(f *testing.F) {
	f.Add("Subject: x\nContent-Type: multipart/alternative; boundary=B\n\n--B\nContent-Type: text/html\nContent-Transfer-Encoding: base64\n\nPGI+aGk8L2I+\n--B--\n", 100)
	f.Add("Subject: =?iso-8859-1?q?caf=E9?=\n\n<script>x", 0)
	f.Add("no headers at all \xff", 5)
	f.Fuzz(func(t *testing.T, raw string, max int) {
		max %= 4096
		s := MessageText(raw, max)
		if !utf8.ValidString(s) {
			t.Fatalf("invalid UTF-8 output %q", s)
		}
		if max > 0 && len(s) > max {
			t.Fatalf("output of %d bytes exceeds %d", len(s), max)
		}
	})
}

func FuzzParseSOTUAddress(f *testing.F) {
	f.Add([]byte(`{"year":1790,"name":"George Washington","party":"none","text":"Fellow-Citizens"}`))
	f.Add([]byte(`{"year":1789,"name":"","party":"","text":"x"}`))
	f.Add([]byte(`{"year":2000,"name":"a","party":"b","text":" "}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := parseSOTUAddress(data)
		if err != nil {
			return
		}
		if a.Year < 1790 || a.Year > 2100 || strings.TrimSpace(a.Text) == "" || !utf8.ValidString(a.Text) {
			t.Fatalf("accepted %+v", a)
		}
	})
}
