package pool

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/wordpiece"
)

// gz compresses raw as the encoders do.
func gz(t testing.TB, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := writeGzip(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func imagesHeader(n uint32, w, h uint16) []byte {
	b := []byte(ImagesMagic)
	b = binary.LittleEndian.AppendUint32(b, n)
	b = binary.LittleEndian.AppendUint16(b, w)
	return binary.LittleEndian.AppendUint16(b, h)
}

func TestImagesRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels []int
		want   []int
		w, h   int
		c      int
	}{
		{"labelled", []int{0, 7, 255}, []int{0, 7, 255}, 3, 2, 0},
		{"unlabeled", nil, []int{0, 0, 0}, 3, 2, 0},
		{"rgb", []int{1, 2, 3}, []int{1, 2, 3}, 1, 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Images{Width: tc.w, Height: tc.h, Channels: tc.c, Labels: tc.labels,
				Pixels: [][]float64{{0, 1, 0.5, 0.25, 1.0 / 255, 0.999}, {1, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0}}}
			var buf bytes.Buffer
			if err := EncodeImages(&buf, s); err != nil {
				t.Fatal(err)
			}
			got, err := DecodeImages(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if got.Width != tc.w || got.Height != tc.h || got.Channels != tc.c || got.Len() != 3 || !reflect.DeepEqual(got.Labels, tc.want) {
				t.Fatalf("decoded %+v", got)
			}
			for i := range s.Pixels {
				for j, p := range s.Pixels[i] {
					if q := got.Pixels[i][j]; q != math.Round(p*255)/255 {
						t.Errorf("image %d pixel %d: %v -> %v", i, j, p, q)
					}
				}
			}
			var again bytes.Buffer
			_ = EncodeImages(&again, s)
			if !bytes.Equal(buf.Bytes(), again.Bytes()) {
				t.Error("EncodeImages is not deterministic")
			}
			// The same bytes uncompressed decode alike.
			zr, err := gzip.NewReader(&buf)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(zr)
			plain, err := DecodeImages(bytes.NewReader(raw))
			if err != nil || !reflect.DeepEqual(plain, got) {
				t.Fatalf("uncompressed: %+v, %v", plain, err)
			}
		})
	}
}

// TestImagesLayout pins the byte layout the package comment documents.
func TestImagesLayout(t *testing.T) {
	s := &Images{Width: 2, Height: 1, Pixels: [][]float64{{0, 1}, {0.5, 0.2}}, Labels: []int{3, 4}}
	var buf bytes.Buffer
	if err := EncodeImages(&buf, s); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header carries name %q, time %v", zr.Name, zr.ModTime)
	}
	raw, _ := io.ReadAll(zr)
	want := append(imagesHeader(2, 2, 1), 3, 4, 0, 255, 128, 51)
	if !bytes.Equal(raw, want) {
		t.Fatalf("layout % x, want % x", raw, want)
	}
	// Two RGB images of 1×1: SFIMGS02, the channel count after the size,
	// each image's channels in order.
	buf.Reset()
	rgb := &Images{Width: 1, Height: 1, Channels: 3, Pixels: [][]float64{{1, 0, 0.2}, {0, 1, 0.5}}}
	if err := EncodeImages(&buf, rgb); err != nil {
		t.Fatal(err)
	}
	zr, err = gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(zr)
	want = append([]byte(ImagesMagicChannels), 2, 0, 0, 0, 1, 0, 1, 0, 3, 0, 0, 0, 255, 0, 51, 0, 255, 128)
	if !bytes.Equal(raw, want) {
		t.Fatalf("RGB layout % x, want % x", raw, want)
	}
}

func TestEncodeImagesErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Images
		want string
	}{
		{"zero size", Images{Width: 0, Height: 1}, "invalid size"},
		{"too wide", Images{Width: MaxImageSide + 1, Height: 1}, "invalid size"},
		{"label count", Images{Width: 1, Height: 1, Pixels: [][]float64{{0}}, Labels: []int{}}, "0 labels for 1 images"},
		{"label range", Images{Width: 1, Height: 1, Pixels: [][]float64{{0}}, Labels: []int{256}}, "outside [0, 255]"},
		{"pixel count", Images{Width: 2, Height: 1, Pixels: [][]float64{{0}}}, "has 1 pixels, want 2"},
		{"rgb pixel count", Images{Width: 2, Height: 1, Channels: 3, Pixels: [][]float64{{0, 0}}}, "has 2 pixels, want 6 (3 channels of 2×1)"},
		{"channels", Images{Width: 1, Height: 1, Channels: 5}, "5 channels outside [1, 4]"},
		{"pixel range", Images{Width: 1, Height: 1, Pixels: [][]float64{{1.5}}}, "outside [0, 1]"},
		{"NaN pixel", Images{Width: 1, Height: 1, Pixels: [][]float64{{math.NaN()}}}, "outside [0, 1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := EncodeImages(&bytes.Buffer{}, &tc.s); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestDecodeImagesErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "header"},
		{"short header", gz(t, []byte("SFIMG")), "header"},
		{"bad magic", gz(t, append([]byte("XXXXXXXX"), 0, 0, 0, 0, 1, 0, 1, 0)), "bad magic"},
		{"zero width", gz(t, imagesHeader(1, 0, 1)), "invalid size"},
		{"too wide", imagesHeader(1, MaxImageSide+1, 1), "invalid size"},
		{"too many bytes", gz(t, imagesHeader(1<<32-1, 4096, 4096)), "exceed the limits"},
		{"too many images", gz(t, imagesHeader(MaxItems+1, 1, 1)), "exceed the limits"},
		{"truncated", gz(t, append(imagesHeader(2, 2, 2), 1, 1, 0, 0, 0)), "want 10"},
		{"trailing", gz(t, append(imagesHeader(1, 1, 1), 1, 2, 3)), "want 2"},
		{"broken gzip", gz(t, imagesHeader(1, 1, 1))[:12], "decode images"},
		{"rgb no channels", gz(t, append([]byte(ImagesMagicChannels), 1, 0, 0, 0, 1, 0, 1, 0)), "header"},
		{"rgb zero channels", gz(t, append([]byte(ImagesMagicChannels), 1, 0, 0, 0, 1, 0, 1, 0, 0, 0)), "0 channels outside [1, 4]"},
		{"rgb 5 channels", gz(t, append([]byte(ImagesMagicChannels), 1, 0, 0, 0, 1, 0, 1, 0, 5, 0)), "5 channels"},
		{"rgb truncated", gz(t, append([]byte(ImagesMagicChannels), 1, 0, 0, 0, 1, 0, 1, 0, 3, 0, 0, 1, 2)), "want 4 for 1 images of 3×1×1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeImages(bytes.NewReader(tc.file)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestLyingHeader: a header that claims a large pool it does not hold makes
// the decoders fail after allocating only about what the file holds.
func TestLyingHeader(t *testing.T) {
	// 400,000 images of 28×28: 314 MB claimed, 100 bytes present.
	file := gz(t, append(imagesHeader(400_000, 28, 28), make([]byte, 100)...))
	for _, tc := range []struct {
		name string
		read func(io.Reader) error
	}{
		{"DecodeImages", func(r io.Reader) error { _, err := DecodeImages(r); return err }},
		{"Read", func(r io.Reader) error { _, err := Read(r); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := tc.read(bytes.NewReader(file))
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), "want 314000000") {
				t.Fatalf("error %v", err)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
				t.Fatalf("allocated %d bytes for a 100-byte body", got)
			}
		})
	}
}

// TestSizeCap: decompressed input past the limit is cut off with
// ErrTooLarge, compressed or not.
func TestSizeCap(t *testing.T) {
	body := []byte(`{"format":"selectformer-texts/1"}` + "\n" + strings.Repeat(`{"text":"abc"}`+"\n", 100))
	for _, tc := range []struct {
		name  string
		file  []byte
		limit int64
		err   error
	}{
		{"plain under", body, int64(len(body)), nil},
		{"plain over", body, int64(len(body)) - 1, ErrTooLarge},
		{"gzip under", gz(t, body), int64(len(body)), nil},
		{"gzip over", gz(t, body), 100, ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd, closeFn, err := decompress(bytes.NewReader(tc.file), tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			defer closeFn()
			s, err := decodeTexts(rd)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if err == nil && s.Len() != 100 {
				t.Fatalf("%d texts", s.Len())
			}
		})
	}
}

func TestTextsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    *Texts
	}{
		{"labelled", &Texts{Texts: []string{"hello <world> & \"you\"", "", "line\nbreaks\tand ünïcødé"}, Labels: []int{1, 0, 2}, ClassNames: []string{"a", "b", "c"}}},
		{"unlabeled", &Texts{Texts: []string{"one", "two"}}},
		{"empty", &Texts{Texts: []string{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := EncodeTexts(&buf, tc.s); err != nil {
				t.Fatal(err)
			}
			got, err := DecodeTexts(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			want := *tc.s
			if want.Labelled() != got.Labelled() || !reflect.DeepEqual(got.Texts, want.Texts) ||
				(want.Labelled() && (!reflect.DeepEqual(got.Labels, want.Labels) || !reflect.DeepEqual(got.ClassNames, want.ClassNames))) ||
				(!want.Labelled() && (got.Labels != nil || got.ClassNames != nil)) {
				t.Errorf("round trip: %+v, want %+v", got, want)
			}
		})
	}
}

// TestTextsLayout pins the line format (and the field order of the
// committed data sets' files).
func TestTextsLayout(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    *Texts
		want string
	}{
		{"labelled", &Texts{Texts: []string{"a<b>"}, Labels: []int{1}, ClassNames: []string{"ham", "spam"}},
			`{"format":"selectformer-texts/1","class_names":["ham","spam"]}` + "\n" + `{"label":1,"text":"a<b>"}` + "\n"},
		{"unlabeled", &Texts{Texts: []string{"x", "y"}},
			`{"format":"selectformer-texts/1"}` + "\n" + `{"text":"x"}` + "\n" + `{"text":"y"}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := EncodeTexts(&buf, tc.s); err != nil {
				t.Fatal(err)
			}
			zr, err := gzip.NewReader(&buf)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(zr)
			if string(raw) != tc.want {
				t.Fatalf("wrote %q, want %q", raw, tc.want)
			}
		})
	}
}

func TestEncodeTextsErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Texts
		want string
	}{
		{"labels", Texts{Texts: []string{"a"}, ClassNames: []string{"x"}}, "0 labels for 1 texts"},
		{"labels without classes", Texts{Texts: []string{"a"}, Labels: []int{0}}, "no class names"},
		{"label range", Texts{Texts: []string{"a"}, Labels: []int{1}, ClassNames: []string{"x"}}, "outside [0, 1)"},
		{"utf8", Texts{Texts: []string{"\xff"}}, "UTF-8"},
		{"classes", Texts{ClassNames: make([]string, MaxClasses+1)}, "class names exceed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := EncodeTexts(&bytes.Buffer{}, &tc.s); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestDecodeTextsErrors(t *testing.T) {
	hdr := `{"format":"selectformer-texts/1","class_names":["ham","spam"]}` + "\n"
	plain := `{"format":"selectformer-texts/1"}` + "\n"
	for _, tc := range []struct {
		name, raw, want string
	}{
		{"empty", "", "missing header"},
		{"blank", "\n \n", "missing header"},
		{"bad header", "{\n", "header"},
		{"format", `{"format":"v9","class_names":["a"]}`, `format "v9"`},
		{"no format", `{"class_names":["a"]}`, `format ""`},
		{"header unknown field", `{"format":"selectformer-texts/1","x":1}`, "unknown field"},
		{"unknown field", hdr + `{"label":0,"text":"a","x":1}`, "line 2"},
		{"no text", plain + `{}`, `line 2: no "text"`},
		{"missing label", hdr + `{"text":"a"}`, `no "label"`},
		{"label without classes", plain + `{"label":0,"text":"a"}`, "no class_names"},
		{"label range", hdr + `{"label":0,"text":"a"}` + "\n" + `{"label":2,"text":"b"}`, "line 3: label 2"},
		{"negative label", hdr + `{"label":-1,"text":"a"}`, "label -1"},
		{"bad json", hdr + `{"label":0,`, "line 2"},
		{"trailing", hdr + `{"label":0,"text":"a"} 5`, "trailing"},
		{"trailing brace", plain + `{"text":"a"}}`, "trailing"},
		{"text not string", plain + `{"text":5}`, "line 2"},
		{"too long", plain + `{"text":"` + strings.Repeat("a", MaxLineBytes) + `"}`, "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, file := range [][]byte{[]byte(tc.raw), gz(t, []byte(tc.raw))} {
				if _, err := DecodeTexts(bytes.NewReader(file)); err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v, want %q", err, tc.want)
				}
			}
		})
	}
}

func TestRead(t *testing.T) {
	var img, txt bytes.Buffer
	if err := EncodeImages(&img, &Images{Width: 1, Height: 2, Pixels: [][]float64{{0, 1}, {1, 0}, {0, 0}}}); err != nil {
		t.Fatal(err)
	}
	if err := EncodeTexts(&txt, &Texts{Texts: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	gunzip := func(b []byte) []byte {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	jsonl := `{"format":"selectformer-texts/1"}` + "\n" + `{"text":"x"}` + "\n"
	for _, tc := range []struct {
		name string
		file []byte
		kind Kind
		n    int
		err  string
	}{
		{"images gzip", img.Bytes(), KindImages, 3, ""},
		{"images plain", gunzip(img.Bytes()), KindImages, 3, ""},
		{"texts gzip", txt.Bytes(), KindTexts, 2, ""},
		{"texts plain", gunzip(txt.Bytes()), KindTexts, 2, ""},
		{"texts CRLF, BOM, blank lines", []byte(utf8BOM + "\r\n  " + strings.ReplaceAll(jsonl, "\n", "\r\n\r\n")), KindTexts, 1, ""},
		{"no texts", []byte(`{"format":"selectformer-texts/1"}`), "", 0, "no texts"},
		{"no images", gz(t, imagesHeader(0, 1, 1)), "", 0, "no images"},
		{"empty file", nil, "", 0, "unknown format"},
		{"csv", []byte("text\nhello\n"), "", 0, "unknown format"},
		{"bad image", gz(t, imagesHeader(1, 0, 1)), "", 0, "images: invalid size"},
		{"bad text", []byte(`{"format":"x"}`), "", 0, "texts: header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Read(bytes.NewReader(tc.file))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Kind() != tc.kind || p.Len() != tc.n {
				t.Fatalf("%s pool of %d, want %s of %d", p.Kind(), p.Len(), tc.kind, tc.n)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "pool.jsonl")
	if err := os.WriteFile(path, []byte(jsonl), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := ReadFile(path); err != nil || p.Len() != 1 || p.Texts.Texts[0] != "x" {
		t.Fatalf("ReadFile: %+v, %v", p, err)
	}
	if _, err := ReadFile(path + ".missing"); err == nil || !strings.Contains(err.Error(), "read pool") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestParseLabels(t *testing.T) {
	classes := []string{"ham", "spam", "7"}
	for _, tc := range []struct {
		in   string
		want []int
		err  string
	}{
		{"0\n1\n2\n", []int{0, 1, 2}, ""},
		{"# header\n\n 1 \r\nspam\nham\n", []int{1, 1, 0}, ""},
		{"7", nil, "class 7 outside [0, 3)"}, // a number wins over the name "7"
		{"-1", nil, "outside"},
		{"01", nil, `"01" is neither`},
		{"1.0", nil, "neither"},
		{"Spam", nil, `"Spam" is neither a class number in [0, 3) nor a class name ("ham", "spam", "7")`},
		{"", nil, "no labels"},
		{"# only a comment", nil, "no labels"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseLabels([]byte(tc.in), classes)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseLabels = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	if _, err := ParseLabels([]byte("0"), nil); err == nil {
		t.Error("parsed labels without classes")
	}
	path := filepath.Join(t.TempDir(), "labels.txt")
	if err := os.WriteFile(path, []byte("ham\n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if l, err := ReadLabels(path, classes); err != nil || !reflect.DeepEqual(l, []int{0, 1}) {
		t.Fatalf("ReadLabels = %v, %v", l, err)
	}
	if _, err := ReadLabels(path+"x", classes); err == nil {
		t.Fatal("read a missing file")
	}
}

func TestInput(t *testing.T) {
	vit := model.Config{Family: model.ViT, ImageSize: 2, NumChannels: 1}
	vit3 := vit
	vit3.NumChannels = 3
	bert := model.Config{Family: model.BERT, VocabSize: 10, MaxPositions: 6}
	vocab, err := wordpiece.NewVocab([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", "[MASK]"})
	if err != nil {
		t.Fatal(err)
	}
	tok := wordpiece.NewTokenizer(vocab, true)
	noMask, err := wordpiece.NewVocab(vocab.Tokens()[:6])
	if err != nil {
		t.Fatal(err)
	}
	// A made-up vocabulary for a BERT-base-sized embedding table: accepted
	// before issue 30, giving a meaningless selection.
	bertBase := model.Config{Family: model.BERT, VocabSize: 30522, MaxPositions: 6}
	padAt1 := bert
	padAt1.PadTokenID = 1
	big, err := wordpiece.NewVocab(append(vocab.Tokens(), "a", "b", "c", "d", "e"))
	if err != nil {
		t.Fatal(err)
	}
	images := &Pool{Images: &Images{Width: 2, Height: 2, Pixels: [][]float64{{0, 1, 0.5, 0}}}}
	rgb := &Pool{Images: &Images{Width: 2, Height: 2, Channels: 3, Pixels: [][]float64{{0, 1, 0.5, 0, 1, 1, 1, 1, 0, 0, 0, 0.5}}}}
	texts := &Pool{Texts: &Texts{Texts: []string{"Hello world", "world"}}}
	for _, tc := range []struct {
		name string
		p    *Pool
		cfg  model.Config
		tok  *wordpiece.Tokenizer
		seq  int
		want model.Input
		err  string
	}{
		{"images", images, vit, nil, 0, model.Input{Pixels: [][]float64{{-1, 1, 0, -1}}}, ""},
		{"images 3 channels", images, vit3, nil, 0, model.Input{Pixels: [][]float64{{-1, 1, 0, -1, -1, 1, 0, -1, -1, 1, 0, -1}}}, ""},
		{"images on bert", images, bert, tok, 0, model.Input{}, "needs a vit checkpoint, not a bert"},
		{"rgb images 3 channels", rgb, vit3, nil, 0, model.Input{Pixels: [][]float64{{-1, 1, 0, -1, 1, 1, 1, 1, -1, -1, -1, 0}}}, ""},
		{"rgb images 1 channel", rgb, vit, nil, 0, model.Input{}, "the images have 3 channels, the checkpoint takes 1 (num_channels): build the pool with 1 channels (mkpool images -channels 1)"},
		{"images wrong size", images, model.Config{Family: model.ViT, ImageSize: 3, NumChannels: 1}, nil, 0, model.Input{}, "do not fit"},
		{"texts max positions", texts, bert, tok, 0, model.Input{
			IDs:     [][]int{{2, 4, 5, 3, 0, 0}, {2, 5, 3, 0, 0, 0}},
			TypeIDs: [][]int{{0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0}},
			Mask:    [][]int{{1, 1, 1, 1, 0, 0}, {1, 1, 1, 0, 0, 0}}}, ""},
		{"texts seq", texts, bert, tok, 3, model.Input{
			IDs: [][]int{{2, 4, 3}, {2, 5, 3}}, TypeIDs: [][]int{{0, 0, 0}, {0, 0, 0}}, Mask: [][]int{{1, 1, 1}, {1, 1, 1}}}, ""},
		{"texts seq too long", texts, bert, tok, 7, model.Input{}, "outside [2, 6]"},
		{"texts seq too short", texts, bert, tok, 1, model.Input{}, "outside [2, 6]"},
		{"texts no tokenizer", texts, bert, nil, 0, model.Input{}, "tokenizer"},
		{"texts foreign vocab", texts, bert, wordpiece.NewTokenizer(big, true), 0, model.Input{}, "12 tokens, more than the 10 rows"},
		{"texts made-up vocab", texts, bertBase, tok, 0, model.Input{}, "the vocabulary has 7 tokens, the checkpoint's word embeddings 30522 rows"},
		{"texts vocab without mask", texts, bert, wordpiece.NewTokenizer(noMask, true), 0, model.Input{}, "no [MASK] token"},
		{"texts pad id", texts, padAt1, tok, 0, model.Input{}, "pad_token_id is 1, which is [UNK] in the vocabulary, not [PAD] (id 0)"},
		{"texts on vit", texts, vit, tok, 0, model.Input{}, "needs a bert or distilbert checkpoint, not a vit"},
		{"empty", &Pool{}, vit, nil, 0, model.Input{}, "empty pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.p.Input(tc.cfg, tc.tok, tc.seq)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Input = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestTextsHeaderHint: a JSON-lines file without the header (issue 30: it
// failed with `json: unknown field "text"`) or with a wrong one is refused
// with the header line it needs and the builder to use.
func TestTextsHeaderHint(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"no header", `{"text":"hello"}` + "\n" + `{"text":"world"}` + "\n", "the first line is a text, not the header"},
		{"labelled, no header", `{"label":1,"text":"hello"}` + "\n", "the first line is a text, not the header"},
		{"other object", `{"name":"x"}` + "\n", `unknown field "name"`},
		{"wrong format", `{"format":"texts/2"}` + "\n", `format "texts/2"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), `add it as line 1`) || !strings.Contains(err.Error(), `{"format":"selectformer-texts/1"}`) ||
				!strings.Contains(err.Error(), "mkpool texts") {
				t.Fatalf("error %v: want %q, the header line and the builder", err, tc.want)
			}
		})
	}
}
