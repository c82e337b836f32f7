package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.bin")
	for i, tc := range []struct {
		data []byte
		mode os.FileMode
	}{
		{[]byte("first"), 0o644},
		{bytes.Repeat([]byte{7}, 3<<20), 0o600}, // larger than the buffer; replaces the first
		{nil, 0o640},
	} {
		if err := Write(path, tc.data, tc.mode); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, tc.data) {
			t.Fatalf("write %d: read back %d bytes, err %v; want %d bytes", i, len(got), err, len(tc.data))
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != tc.mode {
			t.Fatalf("write %d: mode %v, want %v", i, st.Mode().Perm(), tc.mode)
		}
	}
	assertOnlyFile(t, dir, "f.bin")
}

func TestWriteFuncFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := Write(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := WriteFunc(path, 0o600, func(w io.Writer) error {
		if _, err := w.Write([]byte("half of the new")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want it to wrap %v", err, boom)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Fatalf("file now holds %q, want the old content", got)
	}
	assertOnlyFile(t, dir, "state.json")
}

func TestWriteMissingDirectory(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "no", "such", "f"), []byte("x"), 0o644); err == nil {
		t.Fatal("no error writing into a missing directory")
	}
}

// assertOnlyFile fails unless dir holds exactly name (no temporary files left).
func assertOnlyFile(t *testing.T, dir, name string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != name {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %v, want only %s", names, name)
	}
}

func ExampleWrite() {
	dir, _ := os.MkdirTemp("", "atomicfile")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "checkpoint.json")
	_ = Write(path, []byte(`{"phase":1}`), 0o600)
	b, _ := os.ReadFile(path)
	os.Stdout.Write(append(b, '\n'))
	// Output: {"phase":1}
}

// TestReadLimited: a file within the limit is read whole; a larger one is
// refused on its size (ErrTooLarge), a missing one wraps fs.ErrNotExist.
func TestReadLimited(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	if err := Write(path, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		path string
		max  int64
		want error
	}{
		{"within", path, 64, nil},
		{"exact", path, 10, nil},
		{"one-over", path, 9, ErrTooLarge},
		{"missing", filepath.Join(dir, "none"), 64, fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ReadLimited(tc.path, tc.max)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.want == nil && string(b) != "0123456789" {
				t.Fatalf("read %q", b)
			}
		})
	}
}
