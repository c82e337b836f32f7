package pool

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/internal/atomicfile"
	"github.com/selectformer/selectformer/nn/model"
)

// writePNG writes img as a PNG file at dir/name (creating directories).
func writePNG(t testing.TB, dir, name string, img image.Image) {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	writeBytes(t, dir, name, buf.Bytes())
}

func writeBytes(t testing.TB, dir, name string, b []byte) {
	t.Helper()
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// greyImage returns a w×h grey image whose pixel (x, y) is f(x, y).
func greyImage(w, h int, f func(x, y int) uint8) *image.Gray {
	img := image.NewGray(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetGray(x, y, color.Gray{Y: f(x, y)})
		}
	}
	return img
}

// TestBuildImages builds pools from a directory of PNG files of every
// colour model (and one JPEG), in grey and in RGB, and reads them back as a
// ViT input: file order is the pool order, the pixels are the files'.
func TestBuildImages(t *testing.T) {
	dir := t.TempDir()
	gray := greyImage(3, 2, func(x, y int) uint8 { return uint8(10*x + 100*y) })
	rgb := image.NewRGBA(image.Rect(0, 0, 3, 2))
	nrgba := image.NewNRGBA(image.Rect(0, 0, 3, 2))
	pal := image.NewPaletted(image.Rect(0, 0, 3, 2), color.Palette{color.NRGBA{200, 100, 50, 255}, color.NRGBA{0, 0, 255, 0}})
	for y := range 2 {
		for x := range 3 {
			rgb.SetRGBA(x, y, color.RGBA{uint8(50 * x), uint8(60 * y), 255, 255})
			// Half transparent: the stored colour counts, the alpha is dropped.
			nrgba.SetNRGBA(x, y, color.NRGBA{255, uint8(40 * x), 0, 128})
			pal.SetColorIndex(x, y, uint8((x+y)%2))
		}
	}
	writePNG(t, dir, "b/02.png", rgb)
	writePNG(t, dir, "a.png", gray)
	writePNG(t, dir, "b/01.PNG", nrgba)
	writePNG(t, dir, "c.png", pal)
	writeBytes(t, dir, "notes.txt", []byte("not an image"))
	writeBytes(t, dir, ".hidden.png", []byte("skipped"))
	writePNG(t, dir, ".cache/x.png", gray)

	files, skipped, err := ImageFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.png", "b/01.PNG", "b/02.png", "c.png"}; !slices.Equal(files, want) || !slices.Equal(skipped, []string{"notes.txt"}) {
		t.Fatalf("ImageFiles = %q, skipped %q; want %q, [notes.txt]", files, skipped, want)
	}
	luma := func(r, g, b uint8) float64 { return float64((299*int(r)+587*int(g)+114*int(b)+500)/1000) / 255 }
	// The expected channels of pixel (x, y) of each file.
	px := []func(x, y int) [3]uint8{
		func(x, y int) [3]uint8 { v := uint8(10*x + 100*y); return [3]uint8{v, v, v} },
		func(x, y int) [3]uint8 { return [3]uint8{255, uint8(40 * x), 0} },
		func(x, y int) [3]uint8 { return [3]uint8{uint8(50 * x), uint8(60 * y), 255} },
		func(x, y int) [3]uint8 {
			if (x+y)%2 == 0 {
				return [3]uint8{200, 100, 50}
			}
			return [3]uint8{0, 0, 255}
		},
	}
	for _, channels := range []int{1, 3} {
		t.Run(map[int]string{1: "grey", 3: "rgb"}[channels], func(t *testing.T) {
			s, src, err := BuildImages(dir, files, ImageOptions{Width: 3, Height: 2, Channels: channels})
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range files {
				if src[i] != (Source{File: f}) {
					t.Errorf("source %d = %+v, want %s", i, src[i], f)
				}
			}
			var buf bytes.Buffer
			if err := EncodeImages(&buf, s); err != nil {
				t.Fatal(err)
			}
			p, err := Read(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if p.Len() != 4 || p.Images.NumChannels() != channels {
				t.Fatalf("read %d images of %d channels", p.Len(), p.Images.NumChannels())
			}
			for i := range files {
				for y := range 2 {
					for x := range 3 {
						c := px[i](x, y)
						for k := range channels {
							want := float64(c[k]) / 255
							if channels == 1 {
								want = luma(c[0], c[1], c[2])
							}
							if got := p.Images.Pixels[i][k*6+y*3+x]; math.Abs(got-want) > 1e-12 {
								t.Errorf("%s (%d, %d) channel %d = %v, want %v", files[i], x, y, k, got, want)
							}
						}
					}
				}
			}
			if _, err := p.Input(model.Config{Family: model.ViT, ImageSize: 3, NumChannels: channels}, nil, 0); err == nil {
				t.Error("a 3×2 pool fits a 3×3 ViT")
			}
		})
	}
}

// A JPEG is read (lossy: close to its source), and a grey JPEG as grey.
func TestBuildImagesJPEG(t *testing.T) {
	dir := t.TempDir()
	for name, img := range map[string]image.Image{
		"grey.jpg":  greyImage(8, 8, func(x, y int) uint8 { return 128 }),
		"color.JPG": image.NewUniform(color.RGBA{200, 30, 30, 255}),
	} {
		if u, ok := img.(*image.Uniform); ok {
			m := image.NewRGBA(image.Rect(0, 0, 8, 8))
			stdDraw(m, u)
			img = m
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 95}); err != nil {
			t.Fatal(err)
		}
		writeBytes(t, dir, name, buf.Bytes())
	}
	files, _, err := ImageFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := BuildImages(dir, files, ImageOptions{Width: 8, Height: 8, Channels: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][3]float64{{200, 30, 30}, {128, 128, 128}} { // color.JPG, grey.jpg
		for k := range 3 {
			if got := s.Pixels[i][k*64+27] * 255; math.Abs(got-want[k]) > 4 {
				t.Errorf("%s channel %d = %.0f, want about %.0f", files[i], k, got, want[k])
			}
		}
	}
}

func stdDraw(dst *image.RGBA, src image.Image) {
	for y := dst.Rect.Min.Y; y < dst.Rect.Max.Y; y++ {
		for x := dst.Rect.Min.X; x < dst.Rect.Max.X; x++ {
			dst.Set(x, y, src.At(x, y))
		}
	}
}

// An image of another size is refused with its name and both sizes, or
// scaled with Resize.
func TestBuildImagesSize(t *testing.T) {
	dir := t.TempDir()
	writePNG(t, dir, "ok.png", greyImage(4, 4, func(x, y int) uint8 { return 0 }))
	writePNG(t, dir, "photo.png", greyImage(8, 6, func(x, y int) uint8 { return 200 }))
	files, _, err := ImageFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = BuildImages(dir, files, ImageOptions{Width: 4, Height: 4})
	if err == nil || !strings.Contains(err.Error(), "photo.png is 8×6, the pool's images are 4×4") || !strings.Contains(err.Error(), "-resize") {
		t.Fatalf("error %v, want the file, both sizes and -resize", err)
	}
	s, _, err := BuildImages(dir, files, ImageOptions{Width: 4, Height: 4, Resize: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range s.Pixels[1] {
		if math.Abs(p-200.0/255) > 1e-12 {
			t.Fatalf("a uniform image scaled to %v", s.Pixels[1])
		}
	}
	// Scaling a gradient keeps its order (a bilinear filter, no wrap).
	writePNG(t, dir, "ramp.png", greyImage(16, 1, func(x, y int) uint8 { return uint8(16 * x) }))
	ramp, err := LoadImage(filepath.Join(dir, "ramp.png"), ImageOptions{Width: 4, Height: 2, Resize: true})
	if err != nil {
		t.Fatal(err)
	}
	for x := 1; x < 4; x++ {
		if ramp[x] <= ramp[x-1] || ramp[4+x] != ramp[x] {
			t.Fatalf("a horizontal ramp scaled to %v", ramp)
		}
	}
}

// pngHeader returns a PNG signature and IHDR chunk claiming w×h (grey,
// 8 bits), with a valid CRC and no pixels.
func pngHeader(w, h uint32) []byte {
	b := []byte("\x89PNG\r\n\x1a\n")
	data := binary.BigEndian.AppendUint32(nil, w)
	data = binary.BigEndian.AppendUint32(data, h)
	data = append(data, 8, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	chunk := append([]byte("IHDR"), data...)
	b = append(b, chunk...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(chunk))
}

func TestBuildImagesErrors(t *testing.T) {
	dir := t.TempDir()
	writeBytes(t, dir, "fake.png", []byte("text, not a picture"))
	writeBytes(t, dir, "huge.png", pngHeader(100000, 100000))
	writeBytes(t, dir, "cut.png", pngHeader(4, 4))
	var gif bytes.Buffer
	gif.WriteString("GIF89a")
	writeBytes(t, dir, "anim.jpg", gif.Bytes())
	big := filepath.Join(dir, "big.png")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxSourceImageBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	opt := ImageOptions{Width: 4, Height: 4}
	for _, tc := range []struct {
		name, file string
		opt        ImageOptions
		want       string
	}{
		{"not an image", "fake.png", opt, "fake.png: not a PNG or JPEG file"},
		{"huge", "huge.png", ImageOptions{Width: 4, Height: 4, Resize: true}, "100000×100000 pixels, more than"},
		{"truncated", "cut.png", opt, "cut.png"},
		{"gif", "anim.jpg", opt, "not a PNG or JPEG"},
		{"too large", "big.png", opt, "file larger than its limit"},
		{"channels", "cut.png", ImageOptions{Width: 4, Height: 4, Channels: 2}, "2 channels: want 1 (grey) or 3 (RGB)"},
		{"size", "cut.png", ImageOptions{Width: 0, Height: 4}, "size 0×4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadImage(filepath.Join(dir, tc.file), tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if tc.name == "too large" && !errors.Is(err, atomicfile.ErrTooLarge) {
				t.Fatalf("error %v, want ErrTooLarge", err)
			}
		})
	}
	if _, _, err := BuildImages(t.TempDir(), nil, opt); err == nil || !strings.Contains(err.Error(), "no PNG or JPEG files") {
		t.Fatalf("empty directory: %v", err)
	}
	if _, _, err := ImageFiles(big); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("ImageFiles of a file: %v", err)
	}
	if _, _, err := BuildImages(dir, make([]string, MaxItems+1), opt); err == nil || !strings.Contains(err.Error(), "exceed the pool limits") {
		t.Fatalf("too many images: %v", err)
	}
}

func TestReadTextsCSV(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		opt  TextOptions
		want []string
		src  []Source // File "f"
	}{
		{"named column", "id,text,label\n1,hello,ham\n2,\"buy, now\",spam\n", TextOptions{Column: "text"},
			[]string{"hello", "buy, now"}, []Source{{"f", 1, 2}, {"f", 2, 3}}},
		{"quoted newlines and quotes", "text\n\"line one\nline two\"\n\"she said \"\"hi\"\"\"\n", TextOptions{},
			[]string{"line one\nline two", `she said "hi"`}, []Source{{"f", 1, 2}, {"f", 2, 4}}},
		{"crlf and bom", "\xef\xbb\xbfid,text\r\n1,\"a\r\nb\"\r\n2,c\r\n", TextOptions{Column: "text"},
			[]string{"a\nb", "c"}, []Source{{"f", 1, 2}, {"f", 2, 4}}},
		{"column number", "a,b\nx,y\n", TextOptions{Column: "2"}, []string{"y"}, []Source{{"f", 1, 2}}},
		{"name before number", "2,1\nx,y\n", TextOptions{Column: "2"}, []string{"x"}, []Source{{"f", 1, 2}}},
		{"header spaces", "id, text \n1,x\n", TextOptions{Column: "text"}, []string{"x"}, []Source{{"f", 1, 2}}},
		{"tsv", "id\ttext\n1\thello, world\n", TextOptions{Comma: '\t', Column: "text"}, []string{"hello, world"}, []Source{{"f", 1, 2}}},
		{"no header", "x,1\ny,2\n", TextOptions{NoHeader: true, Column: "1"}, []string{"x", "y"}, []Source{{"f", 1, 1}, {"f", 2, 2}}},
		{"no header one column", "x\ny\n", TextOptions{NoHeader: true}, []string{"x", "y"}, []Source{{"f", 1, 1}, {"f", 2, 2}}},
		{"empty texts skipped", "text\nx\n\"\"\n\"  \"\ny\n", TextOptions{}, []string{"x", "y"}, []Source{{"f", 1, 2}, {"f", 4, 5}}},
		{"ragged records", "a,b\nx,y,z\n1,2\n", TextOptions{Column: "b"}, []string{"y", "2"}, []Source{{"f", 1, 2}, {"f", 2, 3}}},
		{"lazy quotes", "text\nsay \"hi\" now\n", TextOptions{LazyQuotes: true}, []string{`say "hi" now`}, []Source{{"f", 1, 2}}},
		{"semicolon", "id;text\n1;a,b\n", TextOptions{Comma: ';', Column: "text"}, []string{"a,b"}, []Source{{"f", 1, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, src, err := ReadTextsCSV(strings.NewReader(tc.file), "f", tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s.Texts, tc.want) || !reflect.DeepEqual(src, tc.src) {
				t.Fatalf("texts %q, sources %v; want %q, %v", s.Texts, src, tc.want, tc.src)
			}
		})
	}
}

func TestReadTextsCSVErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		opt  TextOptions
		want string
	}{
		{"empty", "", TextOptions{}, "f: empty file: no header"},
		{"which column", "id,text\n1,x\n", TextOptions{}, `the header has 2 columns ("id", "text"): name the one of the texts (-column NAME)`},
		{"no such column", "id,body\n1,x\n", TextOptions{Column: "text"}, `no column "text" in the header ("id", "body")`},
		{"duplicate column", "text,text\n1,x\n", TextOptions{Column: "text"}, "names column \"text\" twice"},
		{"bare quote", "text\nsay \"hi\" now\n", TextOptions{}, "-lazy-quotes"},
		{"unclosed quote", "text\n\"open\n", TextOptions{}, "record 1"},
		{"short record", "a,b\nx\n", TextOptions{Column: "b"}, "line 2 (record 1) has 1 fields, no field 2"},
		{"no header name", "x,y\n", TextOptions{NoHeader: true, Column: "text"}, "field number"},
		{"no header several", "x,y\n", TextOptions{NoHeader: true}, "line 1 has 2 fields: name the column"},
		{"latin-1", "text\ncaf\xe9\n", TextOptions{}, "line 2 (record 1): not valid UTF-8"},
		{"only empty", "text\n\"\"\n", TextOptions{}, "no texts"},
		{"utf-16", "\xff\xfet\x00e\x00x\x00t\x00", TextOptions{}, "the file is UTF-16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ReadTextsCSV(strings.NewReader(tc.file), "f", tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestReadTextLines(t *testing.T) {
	s, src, err := ReadTextLines(strings.NewReader("\xef\xbb\xbffirst text\r\n\n  \nsecond, \"quoted\"\nlast without newline"), "t.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"first text", `second, "quoted"`, "last without newline"}
	wsrc := []Source{{"t.txt", 0, 1}, {"t.txt", 0, 4}, {"t.txt", 0, 5}}
	if !reflect.DeepEqual(s.Texts, want) || !reflect.DeepEqual(src, wsrc) {
		t.Fatalf("texts %q, sources %v; want %q, %v", s.Texts, src, want, wsrc)
	}
	for _, tc := range []struct{ name, file, want string }{
		{"empty", "", "no texts"},
		{"blank", "\n \n", "no texts"},
		{"latin-1", "ok\ncaf\xe9\n", "line 2: not valid UTF-8"},
		{"utf-16", "\xfe\xff\x00o\x00k", "the file is UTF-16"},
		{"long line", "ok\n" + strings.Repeat("x", MaxLineBytes/2+1) + "\n", "line 2: a text of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ReadTextLines(strings.NewReader(tc.file), "t.txt")
			if err == nil || !strings.Contains(err.Error(), "t.txt: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// A CSV's texts make a text pool that Read reads back as they were.
func TestTextsCSVPool(t *testing.T) {
	file := "id,text\n1,\"Subject: hi\n\nCheap meds, buy now!\"\n2,Minutes of the meeting\n3,\"\"\n4,Größe 文字\n"
	s, src, err := ReadTextsCSV(strings.NewReader(file), "mails.csv", TextOptions{Column: "text"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := EncodeTexts(&buf, s); err != nil {
		t.Fatal(err)
	}
	p, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Subject: hi\n\nCheap meds, buy now!", "Minutes of the meeting", "Größe 文字"}
	if p.Kind() != KindTexts || !reflect.DeepEqual(p.Texts.Texts, want) {
		t.Fatalf("read %s %q, want %q", p.Kind(), p.Texts.Texts, want)
	}
	var idx bytes.Buffer
	if err := WriteIndex(&idx, src); err != nil {
		t.Fatal(err)
	}
	if got, want := idx.String(), "index,file,record,line\n0,mails.csv,1,2\n1,mails.csv,2,5\n2,mails.csv,4,7\n"; got != want {
		t.Fatalf("index\n%s\nwant\n%s", got, want)
	}
}

func TestWriteIndex(t *testing.T) {
	var b bytes.Buffer
	if err := WriteIndex(&b, []Source{{File: "a.png"}, {File: "dir/b, \"c\".png"}, {File: "x.csv", Record: 3, Line: 7}}); err != nil {
		t.Fatal(err)
	}
	want := "index,file,record,line\n0,a.png,,\n1,\"dir/b, \"\"c\"\".png\",,\n2,x.csv,3,7\n"
	if b.String() != want {
		t.Fatalf("index\n%s\nwant\n%s", b.String(), want)
	}
}

// FuzzReadTextsCSV: any file gives texts that the text format holds, or an
// error; never a panic.
func FuzzReadTextsCSV(f *testing.F) {
	f.Add([]byte("id,text\n1,\"a\nb\"\n2,c\n"), "text", false, false)
	f.Add([]byte("x\ty\n\"q\"\"\"\tz\n"), "2", true, true)
	f.Add([]byte("\xef\xbb\xbftext\r\n\xff\r\n"), "", false, false)
	f.Fuzz(func(t *testing.T, b []byte, column string, noHeader, lazy bool) {
		for _, comma := range []rune{',', '\t'} {
			s, src, err := ReadTextsCSV(bytes.NewReader(b), "f", TextOptions{Comma: comma, Column: column, NoHeader: noHeader, LazyQuotes: lazy})
			if err != nil {
				continue
			}
			if len(src) != len(s.Texts) || len(s.Texts) == 0 {
				t.Fatalf("%d texts, %d sources", len(s.Texts), len(src))
			}
			checkTexts(t, s)
		}
	})
}

// FuzzReadTextLines: any file gives texts that the text format holds, or an
// error.
func FuzzReadTextLines(f *testing.F) {
	f.Add([]byte("a\r\n\nb\n"))
	f.Add([]byte("\xef\xbb\xbf\xff\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, src, err := ReadTextLines(bytes.NewReader(b), "f")
		if err != nil {
			return
		}
		if len(src) != len(s.Texts) || len(s.Texts) == 0 {
			t.Fatalf("%d texts, %d sources", len(s.Texts), len(src))
		}
		checkTexts(t, s)
	})
}

// FuzzDecodeImage: any file content gives a pool image of the asked size
// and channels with values in [0, 1], or an error.
func FuzzDecodeImage(f *testing.F) {
	var buf bytes.Buffer
	_ = png.Encode(&buf, greyImage(3, 2, func(x, y int) uint8 { return uint8(x * y) }))
	f.Add(buf.Bytes(), true, 3)
	buf.Reset()
	_ = jpeg.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 4, 4)), nil)
	f.Add(buf.Bytes(), false, 1)
	f.Add(pngHeader(1<<20, 1<<20), true, 1)
	f.Fuzz(func(t *testing.T, b []byte, resize bool, channels int) {
		if channels != 1 && channels != 3 {
			channels = 1
		}
		opt := ImageOptions{Width: 4, Height: 4, Channels: channels, Resize: resize}
		img, err := decodeImage(b, "f", opt)
		if err != nil {
			return
		}
		if len(img) != channels*16 {
			t.Fatalf("%d values, want %d", len(img), channels*16)
		}
		for _, v := range img {
			if !(v >= 0 && v <= 1) {
				t.Fatalf("value %v outside [0, 1]", v)
			}
		}
	})
}
