package safetensors

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// build assembles a file from a raw header string and data buffer.
func build(header string, data []byte) []byte {
	b := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

func TestParseHandBuilt(t *testing.T) {
	// The header of the reference implementation's own serialization test,
	// with metadata and a second tensor added.
	header := `{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]},` +
		`"__metadata__":{"format":"pt"},"b":{"dtype":"F16","shape":[3],"data_offsets":[16,22]}}  `
	data := []byte{
		1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 3, 0, 0, 0, 0, 0, 0, 0x80, // I32: 1, -1, 3, MinInt32
		0x00, 0x3C, 0x00, 0xC0, 0x00, 0x7C, // F16: 1, -2, +Inf
	}
	f, err := Parse(build(header, data))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Metadata, map[string]string{"format": "pt"}) {
		t.Errorf("metadata = %v", f.Metadata)
	}
	if got := f.Names(); !reflect.DeepEqual(got, []string{"b", "test"}) {
		t.Errorf("names = %v, want sorted [b test]", got)
	}
	tt, ok := f.Get("test")
	if !ok || tt.DType != I32 || !reflect.DeepEqual(tt.Shape, []int{2, 2}) || tt.NumElements() != 4 {
		t.Fatalf("Get(test) = %+v, %v", tt, ok)
	}
	v, err := tt.Float64s()
	if err != nil || !reflect.DeepEqual(v, []float64{1, -1, 3, math.MinInt32}) {
		t.Errorf("test values = %v, %v", v, err)
	}
	tb, _ := f.Get("b")
	v, err = tb.Float64s()
	if err != nil || !reflect.DeepEqual(v, []float64{1, -2, math.Inf(1)}) {
		t.Errorf("b values = %v, %v", v, err)
	}
	if _, ok := f.Get("missing"); ok {
		t.Error("Get(missing) found a tensor")
	}
}

func TestWriteMatchesReference(t *testing.T) {
	// Bytes produced by the reference implementation for
	// serialize({"test": zeros((2, 2), int32)}): header of 60 bytes padded to 64.
	want := build(`{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}    `, make([]byte, 16))
	var buf bytes.Buffer
	if err := Write(&buf, []Tensor{{Name: "test", DType: I32, Shape: []int{2, 2}, Data: make([]byte, 16)}}, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("Write =\n%q\nwant\n%q", buf.Bytes(), want)
	}
}

func TestWriteOrderAndPadding(t *testing.T) {
	ts := []Tensor{
		{Name: "z", DType: U8, Shape: []int{3}, Data: []byte{7, 8, 9}},
		{Name: "a", DType: BOOL, Shape: []int{}, Data: []byte{1}},
		{Name: "empty", DType: F32, Shape: []int{0, 4}, Data: nil},
	}
	var buf bytes.Buffer
	if err := Write(&buf, ts, map[string]string{"k2": "v", "k1": "w"}); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	n := binary.LittleEndian.Uint64(b)
	if n%8 != 0 {
		t.Errorf("header length %d not a multiple of 8", n)
	}
	hdr := string(b[8 : 8+n])
	wantHdr := `{"__metadata__":{"k1":"w","k2":"v"},"a":{"dtype":"BOOL","shape":[],"data_offsets":[0,1]},` +
		`"empty":{"dtype":"F32","shape":[0,4],"data_offsets":[1,1]},"z":{"dtype":"U8","shape":[3],"data_offsets":[1,4]}}`
	if strings.TrimRight(hdr, " ") != wantHdr {
		t.Errorf("header = %q\nwant    %q", hdr, wantHdr)
	}
	if !bytes.Equal(b[8+n:], []byte{1, 7, 8, 9}) {
		t.Errorf("data = %v", b[8+n:])
	}
}

func TestRoundTrip(t *testing.T) {
	vals := []float64{0, 1, -2.5, 1e-3, 3.14159, -65504, 1e-7, math.Inf(-1)}
	for _, dt := range []DType{F64, F32, F16, BF16} {
		t.Run(string(dt), func(t *testing.T) {
			a, err := FromFloat64s("w.weight", dt, []int{2, 4}, vals)
			if err != nil {
				t.Fatal(err)
			}
			b, err := FromFloat64s("bias", dt, []int{1}, []float64{0.5})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "m.safetensors")
			meta := map[string]string{"format": "pt", "dtype": string(dt)}
			if err := WriteFile(path, []Tensor{a, b}, meta); err != nil {
				t.Fatal(err)
			}
			f, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.Metadata, meta) {
				t.Errorf("metadata = %v", f.Metadata)
			}
			got, _ := f.Get("w.weight")
			if !reflect.DeepEqual(*got, a) {
				t.Errorf("tensor = %+v, want %+v", *got, a)
			}
			v, err := got.Float64s()
			if err != nil {
				t.Fatal(err)
			}
			for i, x := range vals {
				var want float64
				switch dt {
				case F64:
					want = x
				case F32:
					want = float64(float32(x))
				case F16:
					want = F16ToFloat64(Float64ToF16(x))
				case BF16:
					want = BF16ToFloat64(Float64ToBF16(x))
				}
				if v[i] != want {
					t.Errorf("element %d = %v, want %v", i, v[i], want)
				}
				if dt != F64 && math.Abs(v[i]-x) > 0.01*math.Abs(x)+1e-7 && !math.IsInf(x, 0) {
					t.Errorf("element %d = %v, too far from %v", i, v[i], x)
				}
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("WriteFile left %d files, want 1", len(entries))
			}
		})
	}
}

func TestIntegerFloat64s(t *testing.T) {
	le := binary.LittleEndian
	tests := []struct {
		dt   DType
		data []byte
		want []float64
	}{
		{I64, le.AppendUint64(nil, uint64(1<<64-5)), []float64{-5}},
		{U64, le.AppendUint64(nil, 1<<40), []float64{1 << 40}},
		{I32, le.AppendUint32(nil, uint32(1<<32-7)), []float64{-7}},
		{U32, le.AppendUint32(nil, 1<<31), []float64{1 << 31}},
		{I16, le.AppendUint16(nil, 0x8000), []float64{-32768}},
		{U16, le.AppendUint16(nil, 0xFFFF), []float64{65535}},
		{I8, []byte{0xFE, 5}, []float64{-2, 5}},
		{U8, []byte{0xFE, 5}, []float64{254, 5}},
		{BOOL, []byte{0, 1}, []float64{0, 1}},
	}
	for _, tc := range tests {
		tt := Tensor{Name: "x", DType: tc.dt, Shape: []int{len(tc.want)}, Data: tc.data}
		got, err := tt.Float64s()
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Float64s = %v, %v; want %v", tc.dt, got, err, tc.want)
		}
	}
	bad := []Tensor{
		{Name: "bool2", DType: BOOL, Shape: []int{1}, Data: []byte{2}},
		{Name: "short", DType: F32, Shape: []int{2}, Data: make([]byte, 4)},
		{Name: "dtype", DType: "Q4", Shape: []int{1}, Data: make([]byte, 1)},
	}
	for _, tt := range bad {
		if _, err := tt.Float64s(); err == nil || !strings.Contains(err.Error(), tt.Name) {
			t.Errorf("%s: Float64s error = %v, want one naming the tensor", tt.Name, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	ok := `"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`
	data8 := make([]byte, 8)
	huge := make([]byte, 8)
	binary.LittleEndian.PutUint64(huge, MaxHeaderSize+1)
	beyond := build(`{}`, nil)
	binary.LittleEndian.PutUint64(beyond, 100)
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"empty file", nil, "shorter than"},
		{"header too large", huge, "exceeds the limit"},
		{"header beyond file", beyond, "exceeds the 2 bytes"},
		{"not an object", build(`[]`, nil), "not a JSON object"},
		{"empty header", build(``, nil), "not a JSON object"},
		{"malformed json", build(`{"a":`, nil), "malformed JSON"},
		{"trailing data", build(`{}{}`, nil), "trailing data"},
		{"duplicate name", build(`{`+ok+`,`+ok+`}`, data8), `duplicate tensor name "a"`},
		{"unknown dtype", build(`{"a":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}}`, data8[:2]), `tensor "a": unknown dtype "F8"`},
		{"negative dim", build(`{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`, nil), `tensor "a": invalid dimension -1`},
		{"fractional dim", build(`{"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,0]}}`, nil), `tensor "a"`},
		{"size mismatch", build(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, data8), `tensor "a": F32 shape [3] needs 12 bytes`},
		{"overflowing shape", build(`{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, data8), "overflows"},
		{"offsets beyond buffer", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, data8), `tensor "a": data offsets [4, 12) beyond`},
		{"reversed offsets", build(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, data8), "invalid data offsets"},
		{"three offsets", build(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0,0]}}`, nil), "has 3 entries"},
		{"missing field", build(`{"a":{"dtype":"U8","shape":[0]}}`, nil), "needs dtype, shape and data_offsets"},
		{"entry not object", build(`{"a":[1]}`, nil), `tensor "a": entry is not a JSON object`},
		{"overlap", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, data8), `tensor "b": data [4, 8) overlaps tensor "a"`},
		{"gap", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, data8), `tensor "a": data begins at 4`},
		{"trailing bytes", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, data8), "cover 4 bytes but the data buffer holds 8"},
		{"metadata values not strings", build(`{"__metadata__":{"n":1}}`, nil), "must map strings to strings"},
		{"metadata not object", build(`{"__metadata__":"x"}`, nil), "not a JSON object"},
		{"duplicate metadata", build(`{"__metadata__":{},"__metadata__":{}}`, nil), "duplicate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(tc.file)
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", f)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestWriteErrors(t *testing.T) {
	tests := []struct {
		name    string
		tensors []Tensor
		want    string
	}{
		{"duplicate", []Tensor{{Name: "a", DType: U8, Shape: []int{1}, Data: []byte{1}}, {Name: "a", DType: U8, Shape: []int{1}, Data: []byte{1}}}, `duplicate tensor name "a"`},
		{"reserved", []Tensor{{Name: "__metadata__", DType: U8, Shape: []int{0}}}, "reserved"},
		{"dtype", []Tensor{{Name: "q", DType: "Q8", Shape: []int{0}}}, `tensor "q": unknown dtype`},
		{"size", []Tensor{{Name: "s", DType: F32, Shape: []int{2}, Data: make([]byte, 4)}}, `tensor "s": F32 shape [2] needs 8 bytes, have 4`},
		{"negative", []Tensor{{Name: "n", DType: U8, Shape: []int{-1}}}, `tensor "n": negative dimension`},
	}
	for _, tc := range tests {
		err := Write(&bytes.Buffer{}, tc.tensors, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Write error = %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := FromFloat64s("x", I32, []int{1}, []float64{1}); err == nil {
		t.Error("FromFloat64s accepted I32")
	}
	if _, err := FromFloat64s("x", F32, []int{3}, []float64{1}); err == nil {
		t.Error("FromFloat64s accepted a shape/length mismatch")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.safetensors")
	if err := WriteFile(path, []Tensor{{Name: "s", DType: F32, Shape: []int{2}}}, nil); err == nil {
		t.Error("WriteFile accepted a bad tensor")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed WriteFile left %d files behind", len(entries))
	}
	if err := WriteFile(filepath.Join(dir, "no", "such", "dir"), nil, nil); err == nil {
		t.Error("WriteFile into a missing directory succeeded")
	}
}

func FuzzParse(f *testing.F) {
	var buf bytes.Buffer
	a, _ := FromFloat64s("a", F16, []int{2, 2}, []float64{1, 2, 3, 4})
	b := Tensor{Name: "b", DType: I8, Shape: []int{3}, Data: []byte{1, 2, 3}}
	_ = Write(&buf, []Tensor{a, b}, map[string]string{"format": "pt"})
	f.Add(buf.Bytes())
	f.Add(build(`{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}`, make([]byte, 16)))
	f.Add(build(`{}`, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		// A file that parses must convert, re-encode and parse to the same content.
		for i := range file.Tensors {
			tt := &file.Tensors[i]
			if v, err := tt.Float64s(); err == nil && len(v) != tt.NumElements() {
				t.Fatalf("tensor %q: %d values for shape %v", tt.Name, len(v), tt.Shape)
			}
		}
		var out bytes.Buffer
		if err := Write(&out, file.Tensors, file.Metadata); err != nil {
			t.Fatalf("re-encoding a parsed file: %v", err)
		}
		again, err := Parse(out.Bytes())
		if err != nil {
			t.Fatalf("re-parsing: %v", err)
		}
		if len(again.Tensors) != len(file.Tensors) {
			t.Fatalf("re-parsed %d tensors, want %d", len(again.Tensors), len(file.Tensors))
		}
		for i := range file.Tensors {
			x, y := file.Tensors[i], again.Tensors[i]
			if x.Name != y.Name || x.DType != y.DType || !reflect.DeepEqual(x.Shape, y.Shape) || !bytes.Equal(x.Data, y.Data) {
				t.Fatalf("tensor %d changed: %+v -> %+v", i, x, y)
			}
		}
	})
}
