package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/selectformer/selectformer/internal/atomicfile"
)

// MaxHeaderSize is the largest JSON header Parse accepts (100 MB, as in the
// reference implementation).
const MaxHeaderSize = 100 << 20

// metadataKey is the reserved header entry holding string-to-string metadata.
const metadataKey = "__metadata__"

// Tensor is one named tensor: its element type, shape (row-major, an empty
// shape is a scalar) and raw little-endian bytes.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// File is a parsed safetensors file. Tensors are sorted by name.
type File struct {
	Metadata map[string]string
	Tensors  []Tensor
}

// tensorInfo is one entry of the JSON header.
type tensorInfo struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// Parse decodes and validates a safetensors file held in b. The returned
// tensors' Data slices alias b (no copy is made).
func Parse(b []byte) (*File, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("safetensors: file of %d bytes is shorter than the 8-byte header length", len(b))
	}
	n := binary.LittleEndian.Uint64(b[:8])
	if n > MaxHeaderSize {
		return nil, fmt.Errorf("safetensors: header length %d exceeds the limit of %d bytes", n, MaxHeaderSize)
	}
	if n > uint64(len(b)-8) {
		return nil, fmt.Errorf("safetensors: header length %d exceeds the %d bytes after the length field", n, len(b)-8)
	}
	header := b[8 : 8+n]
	buf := b[8+n:]
	if len(header) == 0 || header[0] != '{' {
		return nil, errors.New("safetensors: header is not a JSON object (must start with '{')")
	}
	meta, infos, names, err := decodeHeader(header)
	if err != nil {
		return nil, fmt.Errorf("safetensors: header: %w", err)
	}
	f := &File{Metadata: meta, Tensors: make([]Tensor, 0, len(names))}
	type span struct {
		name       string
		begin, end int64
	}
	spans := make([]span, 0, len(names))
	for _, name := range names {
		t, begin, end, err := infos[name].tensor(name)
		if err != nil {
			return nil, fmt.Errorf("safetensors: %w", err)
		}
		if end > int64(len(buf)) {
			return nil, fmt.Errorf("safetensors: tensor %q: data offsets [%d, %d) beyond the %d-byte data buffer", name, begin, end, len(buf))
		}
		t.Data = buf[begin:end:end]
		f.Tensors = append(f.Tensors, t)
		spans = append(spans, span{name, begin, end})
	}
	// The tensors must tile the buffer exactly: sorted by offsets, each begins
	// where the previous one ended, and the last ends at the end of the file.
	sort.SliceStable(spans, func(i, j int) bool {
		if spans[i].begin != spans[j].begin {
			return spans[i].begin < spans[j].begin
		}
		return spans[i].end < spans[j].end
	})
	var pos int64
	prev := ""
	for _, s := range spans {
		switch {
		case s.begin < pos:
			return nil, fmt.Errorf("safetensors: tensor %q: data [%d, %d) overlaps tensor %q ending at %d", s.name, s.begin, s.end, prev, pos)
		case s.begin > pos:
			return nil, fmt.Errorf("safetensors: tensor %q: data begins at %d, leaving a gap after offset %d", s.name, s.begin, pos)
		}
		pos = s.end
		prev = s.name
	}
	if pos != int64(len(buf)) {
		return nil, fmt.Errorf("safetensors: tensors cover %d bytes but the data buffer holds %d", pos, len(buf))
	}
	slices.SortFunc(f.Tensors, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	return f, nil
}

// decodeHeader reads the header object entry by entry so that duplicate
// names are detected (encoding/json would silently keep the last one).
func decodeHeader(header []byte) (map[string]string, map[string]tensorInfo, []string, error) {
	dec := json.NewDecoder(bytes.NewReader(header))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("malformed JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, nil, errors.New("not a JSON object")
	}
	var meta map[string]string
	seenMeta := false
	infos := map[string]tensorInfo{}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("malformed JSON: %w", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, nil, nil, fmt.Errorf("malformed JSON: unexpected %v", tok)
		}
		if name == metadataKey {
			if seenMeta {
				return nil, nil, nil, fmt.Errorf("duplicate %q entry", metadataKey)
			}
			seenMeta = true
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, nil, nil, fmt.Errorf("%s: malformed JSON: %w", metadataKey, err)
			}
			if !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
				if bytes.TrimSpace(raw)[0] != '{' {
					return nil, nil, nil, fmt.Errorf("%s: not a JSON object", metadataKey)
				}
				if err := json.Unmarshal(raw, &meta); err != nil {
					return nil, nil, nil, fmt.Errorf("%s: must map strings to strings: %w", metadataKey, err)
				}
			}
			continue
		}
		if _, dup := infos[name]; dup {
			return nil, nil, nil, fmt.Errorf("duplicate tensor name %q", name)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, nil, fmt.Errorf("tensor %q: malformed JSON: %w", name, err)
		}
		if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
			return nil, nil, nil, fmt.Errorf("tensor %q: entry is not a JSON object", name)
		}
		var info tensorInfo
		if err := json.Unmarshal(raw, &info); err != nil {
			return nil, nil, nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		infos[name] = info
		names = append(names, name)
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, nil, nil, fmt.Errorf("malformed JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, nil, errors.New("malformed JSON: trailing data after the header object")
	}
	return meta, infos, names, nil
}

// tensor validates one header entry and returns the tensor (without data) and
// its byte offsets.
func (ti tensorInfo) tensor(name string) (Tensor, int64, int64, error) {
	if ti.DType == nil || ti.Shape == nil || ti.DataOffsets == nil {
		return Tensor{}, 0, 0, fmt.Errorf("tensor %q: entry needs dtype, shape and data_offsets", name)
	}
	dt := DType(*ti.DType)
	if err := checkDType(dt); err != nil {
		return Tensor{}, 0, 0, fmt.Errorf("tensor %q: %w", name, err)
	}
	shape := make([]int, len(*ti.Shape))
	for i, d := range *ti.Shape {
		if d < 0 {
			return Tensor{}, 0, 0, fmt.Errorf("tensor %q: invalid dimension %d at index %d", name, d, i)
		}
		shape[i] = int(d)
	}
	nbytes, err := byteSize(dt, shape)
	if err != nil {
		return Tensor{}, 0, 0, fmt.Errorf("tensor %q: %w", name, err)
	}
	off := *ti.DataOffsets
	if len(off) != 2 {
		return Tensor{}, 0, 0, fmt.Errorf("tensor %q: data_offsets has %d entries, want 2", name, len(off))
	}
	begin, end := off[0], off[1]
	if begin < 0 || end < begin {
		return Tensor{}, 0, 0, fmt.Errorf("tensor %q: invalid data offsets [%d, %d)", name, begin, end)
	}
	if uint64(end-begin) != nbytes {
		return Tensor{}, 0, 0, fmt.Errorf("tensor %q: %s shape %v needs %d bytes but data offsets [%d, %d) span %d", name, dt, shape, nbytes, begin, end, end-begin)
	}
	return Tensor{Name: name, DType: dt, Shape: shape}, begin, end, nil
}

// byteSize returns the number of bytes of a tensor of the given dtype and
// shape, failing on negative dimensions or overflow.
func byteSize(dt DType, shape []int) (uint64, error) {
	n := uint64(dt.Size())
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension %d at index %d", d, i)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("shape %v overflows", shape)
		}
		n = lo
	}
	return n, nil
}

// ReadFile reads and parses the safetensors file at path.
func ReadFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Get returns the tensor with the given name.
func (f *File) Get(name string) (*Tensor, bool) {
	i, ok := slices.BinarySearchFunc(f.Tensors, name, func(t Tensor, n string) int { return strings.Compare(t.Name, n) })
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Names returns the tensor names in sorted order.
func (f *File) Names() []string {
	out := make([]string, len(f.Tensors))
	for i, t := range f.Tensors {
		out[i] = t.Name
	}
	return out
}

// NumElements returns the product of the tensor's dimensions (1 for a scalar).
func (t *Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Float64s converts the tensor's elements to float64. Floating-point dtypes
// convert exactly; integers convert as by a Go conversion (I64/U64 values
// beyond 2^53 are rounded); BOOL gives 0 or 1.
func (t *Tensor) Float64s() ([]float64, error) {
	if err := checkDType(t.DType); err != nil {
		return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	nbytes, err := byteSize(t.DType, t.Shape)
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	if uint64(len(t.Data)) != nbytes {
		return nil, fmt.Errorf("tensor %q: %s shape %v needs %d bytes, have %d", t.Name, t.DType, t.Shape, nbytes, len(t.Data))
	}
	sz := t.DType.Size()
	out := make([]float64, len(t.Data)/sz)
	le := binary.LittleEndian
	d := t.Data
	for i := range out {
		p := d[i*sz : (i+1)*sz]
		switch t.DType {
		case F64:
			out[i] = math.Float64frombits(le.Uint64(p))
		case F32:
			out[i] = float64(math.Float32frombits(le.Uint32(p)))
		case F16:
			out[i] = F16ToFloat64(le.Uint16(p))
		case BF16:
			out[i] = BF16ToFloat64(le.Uint16(p))
		case I64:
			out[i] = float64(int64(le.Uint64(p)))
		case I32:
			out[i] = float64(int32(le.Uint32(p)))
		case I16:
			out[i] = float64(int16(le.Uint16(p)))
		case I8:
			out[i] = float64(int8(p[0]))
		case U64:
			out[i] = float64(le.Uint64(p))
		case U32:
			out[i] = float64(le.Uint32(p))
		case U16:
			out[i] = float64(le.Uint16(p))
		case U8:
			out[i] = float64(p[0])
		case BOOL:
			if p[0] > 1 {
				return nil, fmt.Errorf("tensor %q: BOOL element %d has byte value %d", t.Name, i, p[0])
			}
			out[i] = float64(p[0])
		}
	}
	return out, nil
}

// FromFloat64s builds a tensor of dtype F64, F32, F16 or BF16 from values in
// row-major order. Conversions round to nearest, ties to even.
func FromFloat64s(name string, dt DType, shape []int, v []float64) (Tensor, error) {
	if !dt.IsFloat() {
		return Tensor{}, fmt.Errorf("tensor %q: FromFloat64s supports F64, F32, F16 and BF16, not %q", name, string(dt))
	}
	nbytes, err := byteSize(dt, shape)
	if err != nil {
		return Tensor{}, fmt.Errorf("tensor %q: %w", name, err)
	}
	sz := dt.Size()
	if nbytes != uint64(len(v))*uint64(sz) {
		return Tensor{}, fmt.Errorf("tensor %q: shape %v holds %d elements, got %d values", name, shape, nbytes/uint64(sz), len(v))
	}
	data := make([]byte, nbytes)
	le := binary.LittleEndian
	for i, x := range v {
		p := data[i*sz:]
		switch dt {
		case F64:
			le.PutUint64(p, math.Float64bits(x))
		case F32:
			le.PutUint32(p, math.Float32bits(float32(x)))
		case F16:
			le.PutUint16(p, Float64ToF16(x))
		case BF16:
			le.PutUint16(p, Float64ToBF16(x))
		}
	}
	return Tensor{Name: name, DType: dt, Shape: slices.Clone(shape), Data: data}, nil
}

// Write encodes tensors and optional metadata as a safetensors file. The
// header lists "__metadata__" first (omitted when empty) and then the tensors
// sorted by name, with data in the same order; it is padded with spaces to a
// multiple of 8 bytes as the Hugging Face implementation does.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	sorted := make([]*Tensor, len(tensors))
	for i := range tensors {
		sorted[i] = &tensors[i]
	}
	slices.SortFunc(sorted, func(a, b *Tensor) int { return strings.Compare(a.Name, b.Name) })
	var hdr bytes.Buffer
	hdr.WriteByte('{')
	if len(metadata) > 0 {
		m, err := json.Marshal(metadata) // keys sorted by encoding/json
		if err != nil {
			return fmt.Errorf("safetensors: metadata: %w", err)
		}
		hdr.WriteString(`"` + metadataKey + `":`)
		hdr.Write(m)
	}
	var off uint64
	for i, t := range sorted {
		if t.Name == metadataKey {
			return fmt.Errorf("safetensors: tensor name %q is reserved", metadataKey)
		}
		if i > 0 && sorted[i-1].Name == t.Name {
			return fmt.Errorf("safetensors: duplicate tensor name %q", t.Name)
		}
		if err := checkDType(t.DType); err != nil {
			return fmt.Errorf("safetensors: tensor %q: %w", t.Name, err)
		}
		nbytes, err := byteSize(t.DType, t.Shape)
		if err != nil {
			return fmt.Errorf("safetensors: tensor %q: %w", t.Name, err)
		}
		if nbytes != uint64(len(t.Data)) {
			return fmt.Errorf("safetensors: tensor %q: %s shape %v needs %d bytes, have %d", t.Name, t.DType, t.Shape, nbytes, len(t.Data))
		}
		if hdr.Len() > 1 {
			hdr.WriteByte(',')
		}
		name, err := json.Marshal(t.Name)
		if err != nil {
			return fmt.Errorf("safetensors: tensor %q: %w", t.Name, err)
		}
		hdr.Write(name)
		hdr.WriteString(`:{"dtype":"` + string(t.DType) + `","shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				hdr.WriteByte(',')
			}
			fmt.Fprint(&hdr, d)
		}
		fmt.Fprintf(&hdr, `],"data_offsets":[%d,%d]}`, off, off+nbytes)
		off += nbytes
	}
	hdr.WriteByte('}')
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}
	if hdr.Len() > MaxHeaderSize {
		return fmt.Errorf("safetensors: header of %d bytes exceeds the limit of %d", hdr.Len(), MaxHeaderSize)
	}
	var lenField [8]byte
	binary.LittleEndian.PutUint64(lenField[:], uint64(hdr.Len()))
	if _, err := w.Write(lenField[:]); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	if _, err := w.Write(hdr.Bytes()); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	for _, t := range sorted {
		if _, err := w.Write(t.Data); err != nil {
			return fmt.Errorf("safetensors: write tensor %q: %w", t.Name, err)
		}
	}
	return nil
}

// WriteFile writes a safetensors file atomically: it writes a temporary file
// in the same directory, syncs it, and renames it over path. The file is
// owner-only (mode 0600): weights are their owner's secret.
func WriteFile(path string, tensors []Tensor, metadata map[string]string) error {
	err := atomicfile.WriteFunc(path, 0o600, func(w io.Writer) error {
		return Write(w, tensors, metadata)
	})
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}
