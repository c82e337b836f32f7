package pool

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"image"
	"image/color"
	stddraw "image/draw"
	_ "image/jpeg" // registers JPEG with image.Decode
	_ "image/png"  // registers PNG with image.Decode
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/image/draw"

	"github.com/selectformer/selectformer/internal/atomicfile"
)

// Limits on the source images a builder decodes.
const (
	// MaxSourceImageBytes bounds one PNG or JPEG file, checked before it is
	// read.
	MaxSourceImageBytes = 64 << 20
	// MaxSourcePixels bounds the width·height of one source image, checked
	// on its header before its pixels are decoded.
	MaxSourcePixels = 1 << 26
)

// Source says where a pool candidate came from: the pool's index i is the
// builder's Source i. A selection's result names pool indices; the index
// file (WriteIndex) turns them back into files and rows.
type Source struct {
	// File is, for an image, its path relative to the directory the pool
	// was built from, with "/" separators; for a text, the file it was
	// read from, as given.
	File string
	// Record is a CSV or TSV text's data record, counted from 1 after the
	// header (a spreadsheet's row number less the header); 0 otherwise.
	Record int
	// Line is the line of the file where a text starts, counted from 1; 0
	// for an image.
	Line int
}

// WriteIndex writes the index file of a built pool: CSV (RFC 4180) with the
// header "index,file,record,line" and one row per candidate, in pool
// order: its pool index (from 0, as in a selection result), then the fields
// of its Source (record and line empty when 0).
func WriteIndex(w io.Writer, src []Source) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"index", "file", "record", "line"}); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	num := func(n int) string {
		if n == 0 {
			return ""
		}
		return strconv.Itoa(n)
	}
	for i, s := range src {
		if err := cw.Write([]string{strconv.Itoa(i), s.File, num(s.Record), num(s.Line)}); err != nil {
			return fmt.Errorf("write index: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	return nil
}

// ImageOptions say what images a pool is built of.
type ImageOptions struct {
	// Width and Height are the pool's image size in pixels (a ViT's
	// image_size for both).
	Width, Height int
	// Channels is 1 (grey scale, "SFIMGS01") or 3 (RGB, "SFIMGS02"); 0
	// means 1.
	Channels int
	// Resize scales every image of another size to Width×Height (bilinear,
	// the aspect ratio not kept, as the Hugging Face ViT image processor
	// resizes); without it such an image is an error.
	Resize bool
}

// isImageFile reports whether name has a PNG or JPEG extension.
func isImageFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".png", ".jpg", ".jpeg":
		return true
	}
	return false
}

// ImageFiles lists the PNG and JPEG files (by extension: .png, .jpg,
// .jpeg, in any case) in dir and its subdirectories, as paths relative to
// dir with "/" separators, in byte-wise order of those paths: the order of
// the pool that BuildImages makes of them (so "a.png" comes before
// "a/b.png", and "10.png" before "2.png": name files 002.png, 010.png to
// keep a numeric order). Files and directories whose names start with "."
// are left out, and symbolic links to directories are not followed;
// skipped lists the other files left out (not PNG or JPEG).
func ImageFiles(dir string) (files, skipped []string, err error) {
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == dir {
			if !d.IsDir() {
				return fmt.Errorf("%s is not a directory", dir)
			}
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if isImageFile(rel) {
			files = append(files, rel)
		} else {
			skipped = append(skipped, rel)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("image files: %w", err)
	}
	slices.Sort(files)
	slices.Sort(skipped)
	return files, skipped, nil
}

// BuildImages reads the image files (paths relative to dir, as ImageFiles
// returns them) and makes them a pool, image i from files[i], with each
// image's Source. See LoadImage for the conversion.
func BuildImages(dir string, files []string, opt ImageOptions) (*Images, []Source, error) {
	if err := opt.check(); err != nil {
		return nil, nil, err
	}
	c := max(opt.Channels, 1)
	n := len(files)
	if n == 0 {
		return nil, nil, fmt.Errorf("build images: no PNG or JPEG files in %s", dir)
	}
	if n > MaxItems || uint64(n)*uint64(1+c*opt.Width*opt.Height) > MaxImageBytes {
		return nil, nil, fmt.Errorf("build images: %d images of %d×%d×%d exceed the pool limits (%d images, %d bytes of pixels): build several pools", n, c, opt.Width, opt.Height, MaxItems, MaxImageBytes)
	}
	s := &Images{Width: opt.Width, Height: opt.Height, Pixels: make([][]float64, n)}
	if c > 1 {
		s.Channels = c
	}
	src := make([]Source, n)
	for i, f := range files {
		img, err := LoadImage(filepath.Join(dir, filepath.FromSlash(f)), opt)
		if err != nil {
			return nil, nil, fmt.Errorf("build images: %w", err)
		}
		s.Pixels[i], src[i] = img, Source{File: f}
	}
	return s, src, nil
}

func (opt ImageOptions) check() error {
	if opt.Width < 1 || opt.Height < 1 || opt.Width > MaxImageSide || opt.Height > MaxImageSide {
		return fmt.Errorf("build images: size %d×%d outside 1..%d", opt.Width, opt.Height, MaxImageSide)
	}
	if opt.Channels != 0 && opt.Channels != 1 && opt.Channels != 3 {
		return fmt.Errorf("build images: %d channels: want 1 (grey) or 3 (RGB)", opt.Channels)
	}
	return nil
}

// LoadImage decodes the PNG or JPEG file at path (recognised by its
// content) into a pool image of opt's size and channels, values in [0, 1]:
//
//   - its size must be opt's, unless opt.Resize, which scales it
//     (bilinear);
//   - an alpha channel is dropped (as PIL's convert("RGB") does, which the
//     Hugging Face image processors apply);
//   - for 1 channel a colour image becomes its luma, (299·R + 587·G +
//     114·B)/1000 (ITU-R BT.601, PIL's convert("L")); for 3 channels a grey
//     image is repeated over red, green and blue.
//
// The file may hold at most MaxSourceImageBytes and MaxSourcePixels, checked
// before its pixels are decoded.
func LoadImage(path string, opt ImageOptions) ([]float64, error) {
	if err := opt.check(); err != nil {
		return nil, err
	}
	b, err := atomicfile.ReadLimited(path, MaxSourceImageBytes)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", path, err)
	}
	return decodeImage(b, path, opt)
}

// decodeImage is LoadImage on the file's content b; name is for messages.
func decodeImage(b []byte, name string, opt ImageOptions) ([]float64, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("image %s: not a PNG or JPEG file: %w", name, err)
	}
	if format != "png" && format != "jpeg" {
		return nil, fmt.Errorf("image %s: a %s file, not PNG or JPEG", name, format)
	}
	if cfg.Width < 1 || cfg.Height < 1 || uint64(cfg.Width)*uint64(cfg.Height) > MaxSourcePixels {
		return nil, fmt.Errorf("image %s: %d×%d pixels, more than the %d a source image may have", name, cfg.Width, cfg.Height, MaxSourcePixels)
	}
	if !opt.Resize && (cfg.Width != opt.Width || cfg.Height != opt.Height) {
		return nil, fmt.Errorf("image %s is %d×%d, the pool's images are %d×%d: resize the images to %d×%d, or build with -resize (ImageOptions.Resize) to scale every image to that size",
			name, cfg.Width, cfg.Height, opt.Width, opt.Height, opt.Width, opt.Height)
	}
	img, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", name, err)
	}
	if r := img.Bounds(); r.Dx() != cfg.Width || r.Dy() != cfg.Height {
		return nil, fmt.Errorf("image %s: decoded %d×%d, its header says %d×%d", name, r.Dx(), r.Dy(), cfg.Width, cfg.Height)
	}
	return convertImage(img, opt), nil
}

// convertImage drops img's alpha, scales it to opt's size if it differs,
// and returns its channels as values in [0, 1].
func convertImage(img image.Image, opt ImageOptions) []float64 {
	r := img.Bounds()
	grey, isGrey := img.(*image.Gray)
	if !isGrey || r.Dx() != opt.Width || r.Dy() != opt.Height {
		isGrey = false
	}
	w, h := opt.Width, opt.Height
	var rgb *image.RGBA
	if !isGrey {
		rgb = opaqueRGBA(img)
		if r.Dx() != w || r.Dy() != h {
			dst := image.NewRGBA(image.Rect(0, 0, w, h))
			draw.BiLinear.Scale(dst, dst.Bounds(), rgb, rgb.Bounds(), draw.Src, nil)
			rgb = dst
		}
	}
	c := max(opt.Channels, 1)
	out := make([]float64, c*w*h)
	for y := range h {
		for x := range w {
			i := y*w + x
			if isGrey {
				g := float64(grey.Pix[grey.PixOffset(r.Min.X+x, r.Min.Y+y)]) / 255
				for k := range c {
					out[k*w*h+i] = g
				}
				continue
			}
			p := rgb.Pix[y*rgb.Stride+4*x:]
			if c == 1 {
				out[i] = float64((299*int(p[0])+587*int(p[1])+114*int(p[2])+500)/1000) / 255
				continue
			}
			for k := range 3 {
				out[k*w*h+i] = float64(p[k]) / 255
			}
		}
	}
	return out
}

// opaqueRGBA copies img into an RGBA image at the origin with its alpha
// dropped: the colour values as stored, alpha 255.
func opaqueRGBA(img image.Image) *image.RGBA {
	r := img.Bounds()
	dst := image.NewRGBA(image.Rect(0, 0, r.Dx(), r.Dy()))
	if o, ok := img.(interface{ Opaque() bool }); ok && o.Opaque() {
		stddraw.Draw(dst, dst.Bounds(), img, r.Min, stddraw.Src)
		return dst
	}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			// Non-premultiplied: a transparent pixel keeps its colour, as
			// when PIL drops the alpha channel.
			c := nrgba(img, x, y)
			i := (y-r.Min.Y)*dst.Stride + 4*(x-r.Min.X)
			dst.Pix[i], dst.Pix[i+1], dst.Pix[i+2], dst.Pix[i+3] = c[0], c[1], c[2], 255
		}
	}
	return dst
}

// nrgba returns the pixel's non-premultiplied red, green and blue.
func nrgba(img image.Image, x, y int) [3]uint8 {
	switch m := img.(type) {
	case *image.Paletted:
		if c, ok := m.Palette[m.ColorIndexAt(x, y)].(color.NRGBA); ok {
			return [3]uint8{c.R, c.G, c.B}
		}
	case *image.NRGBA:
		p := m.Pix[m.PixOffset(x, y):]
		return [3]uint8{p[0], p[1], p[2]}
	case *image.NRGBA64:
		p := m.Pix[m.PixOffset(x, y):]
		return [3]uint8{p[0], p[2], p[4]}
	}
	r, g, b, a := img.At(x, y).RGBA()
	if a == 0 {
		return [3]uint8{}
	}
	un := func(v uint32) uint8 { return uint8((v * 0xffff / a) >> 8) }
	return [3]uint8{un(r), un(g), un(b)}
}

// TextOptions say how ReadTextsCSV reads a CSV or TSV file.
type TextOptions struct {
	// Comma separates fields: ',' (CSV; 0 means ','), '\t' (TSV) or ';'.
	Comma rune
	// Column names the column of the texts: a name in the header, or a
	// field number counted from 1. "" picks the only column of a file with
	// one.
	Column string
	// NoHeader says the first record is data, not a header; Column must
	// then be a number (or empty, for one column).
	NoHeader bool
	// LazyQuotes accepts a quote inside an unquoted field and an undoubled
	// quote in a quoted one (encoding/csv's LazyQuotes), as some exports
	// write them.
	LazyQuotes bool
}

// ReadTextsCSV reads the texts of one column of a CSV or TSV file (RFC 4180
// quoting: a field in double quotes may hold the separator, newlines and
// doubled quotes ""; a "\r\n" line end and a leading UTF-8 byte order mark
// are accepted), with each text's Source (File name, its record and
// line). Records may have different numbers of fields, but each must reach
// the column. A text that is empty or only white space is left out (its
// record has no pool index: the Sources say which record each index is).
// Texts must be UTF-8; at most MaxTextBytes are read, MaxItems texts kept.
func ReadTextsCSV(r io.Reader, name string, opt TextOptions) (*Texts, []Source, error) {
	br, err := skipBOM(&capReader{r: r, left: MaxTextBytes})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	cr := csv.NewReader(br)
	cr.Comma = opt.Comma
	if cr.Comma == 0 {
		cr.Comma = ','
	}
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = opt.LazyQuotes
	cr.ReuseRecord = true
	fail := func(format string, a ...any) (*Texts, []Source, error) {
		return nil, nil, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, a...))
	}
	col := -1
	if !opt.NoHeader {
		hdr, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return fail("empty file: no header")
		}
		if err != nil {
			return fail("header: %v%s", err, quoteHint(err, opt))
		}
		if col, err = headerColumn(hdr, opt.Column); err != nil {
			return fail("%v", err)
		}
	} else if opt.Column != "" {
		n, err := strconv.Atoi(opt.Column)
		if err != nil || n < 1 {
			return fail("column %q: without a header the column is a field number, counted from 1", opt.Column)
		}
		col = n - 1
	}
	s, src := &Texts{Texts: []string{}}, []Source{}
	for record := 1; ; record++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fail("record %d: %v%s", record, err, quoteHint(err, opt))
		}
		line, _ := cr.FieldPos(0)
		if col < 0 { // no header, no column: the file must have one
			if len(rec) != 1 {
				return fail("line %d has %d fields: name the column of the texts (-column N, from 1)", line, len(rec))
			}
			col = 0
		}
		if col >= len(rec) {
			return fail("line %d (record %d) has %d fields, no field %d", line, record, len(rec), col+1)
		}
		text := rec[col]
		line, _ = cr.FieldPos(col)
		if strings.TrimSpace(text) == "" {
			continue
		}
		if err := checkText(text, len(s.Texts)); err != nil {
			return fail("line %d (record %d): %v", line, record, err)
		}
		s.Texts = append(s.Texts, text)
		src = append(src, Source{File: name, Record: record, Line: line})
	}
	if len(s.Texts) == 0 {
		return fail("no texts (every record's field is empty)")
	}
	return s, src, nil
}

// headerColumn finds the column named by column in a header.
func headerColumn(hdr []string, column string) (int, error) {
	names := make([]string, len(hdr))
	for i, h := range hdr {
		names[i] = strings.TrimSpace(h)
	}
	list := func() string {
		q := make([]string, len(names))
		for i, n := range names {
			q[i] = strconv.Quote(n)
		}
		return strings.Join(q, ", ")
	}
	if column == "" {
		if len(names) == 1 {
			return 0, nil
		}
		return 0, fmt.Errorf("the header has %d columns (%s): name the one of the texts (-column NAME)", len(names), list())
	}
	col := -1
	for i, n := range names {
		if n == strings.TrimSpace(column) {
			if col >= 0 {
				return 0, fmt.Errorf("the header names column %q twice (fields %d and %d): give its field number (-column N)", n, col+1, i+1)
			}
			col = i
		}
	}
	if col >= 0 {
		return col, nil
	}
	if n, err := strconv.Atoi(column); err == nil && n >= 1 && n <= len(names) {
		return n - 1, nil
	}
	return 0, fmt.Errorf("no column %q in the header (%s)", column, list())
}

// quoteHint suggests LazyQuotes for a quote error.
func quoteHint(err error, opt TextOptions) string {
	if !opt.LazyQuotes && (errors.Is(err, csv.ErrBareQuote) || errors.Is(err, csv.ErrQuote)) {
		return " (if the file has unescaped quotes in its fields, read it with -lazy-quotes)"
	}
	return ""
}

// checkText checks one text for the text format: valid UTF-8, not too
// long, and room for one more.
func checkText(text string, have int) error {
	if !utf8.ValidString(text) {
		return errors.New("not valid UTF-8: convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)")
	}
	if len(text) > MaxLineBytes/2 {
		return fmt.Errorf("a text of %d bytes, more than %d", len(text), MaxLineBytes/2)
	}
	if have == MaxItems {
		return fmt.Errorf("more than %d texts", MaxItems)
	}
	return nil
}

// ReadTextLines reads a plain-text file of one text per line (UTF-8; "\n"
// or "\r\n" line ends; a leading byte order mark is skipped), with each
// text's Source (File name and line). Lines that are empty or only white
// space are left out (the Sources say which line each pool index is). At
// most MaxTextBytes are read, MaxItems texts kept, and a line may hold
// MaxLineBytes/2 bytes.
func ReadTextLines(r io.Reader, name string) (*Texts, []Source, error) {
	br, err := skipBOM(&capReader{r: r, left: MaxTextBytes})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	s, src := &Texts{Texts: []string{}}, []Source{}
	var buf []byte
	line := 0
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) > MaxLineBytes/2+2 {
			return nil, nil, fmt.Errorf("%s: line %d: a text of more than %d bytes", name, line+1, MaxLineBytes/2)
		}
		buf = append(buf, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, fmt.Errorf("%s: line %d: %w", name, line+1, err)
		}
		if len(buf) > 0 {
			line++
			text := strings.TrimSuffix(strings.TrimSuffix(string(buf), "\n"), "\r")
			buf = buf[:0]
			if strings.TrimSpace(text) != "" {
				if err := checkText(text, len(s.Texts)); err != nil {
					return nil, nil, fmt.Errorf("%s: line %d: %w", name, line, err)
				}
				s.Texts = append(s.Texts, text)
				src = append(src, Source{File: name, Line: line})
			}
		}
		if err != nil { // io.EOF
			break
		}
	}
	if len(s.Texts) == 0 {
		return nil, nil, fmt.Errorf("%s: no texts (no line that is not empty)", name)
	}
	return s, src, nil
}

// errUTF16 explains a file in UTF-16, as spreadsheets save "Unicode text".
var errUTF16 = errors.New("the file is UTF-16 (a spreadsheet's \"Unicode text\"): save it as \"CSV UTF-8\", or convert it (iconv -f utf-16 -t utf-8)")

// skipBOM returns a buffered reader of r past a leading UTF-8 byte order
// mark, or errUTF16 if r starts with a UTF-16 one.
func skipBOM(r io.Reader) (*bufio.Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	b, _ := br.Peek(len(utf8BOM))
	switch {
	case bytes.HasPrefix(b, []byte(utf8BOM)):
		_, _ = br.Discard(len(utf8BOM))
	case bytes.HasPrefix(b, []byte{0xff, 0xfe}) || bytes.HasPrefix(b, []byte{0xfe, 0xff}):
		return nil, errUTF16
	}
	return br, nil
}
