// Package atomicfile writes files so that neither a concurrent reader nor a
// crash ever sees a partial file: the content goes to a temporary file in the
// same directory, is synced to disk, and is renamed over the destination;
// the directory is synced afterwards so the rename itself survives a crash.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write atomically replaces path with data, with permissions mode.
func Write(path string, data []byte, mode os.FileMode) error {
	return WriteFunc(path, mode, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFunc atomically replaces path with what write writes (through a
// buffer), with permissions mode. If write or any step fails, path is left
// as it was and the temporary file is removed.
func WriteFunc(path string, mode os.FileMode, write func(w io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("atomic write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			err = fmt.Errorf("atomic write %s: %w", path, err)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil { // best effort: not every file system syncs directories
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// ErrTooLarge is ReadLimited's error for a file larger than its limit.
var ErrTooLarge = errors.New("file larger than its limit")

// ReadLimited reads the whole file at path if it holds at most max bytes,
// checked on its size before anything is allocated; a larger file is an
// error wrapping ErrTooLarge (state files are read whole, so a file grown
// by accident or by a hostile hand must not size an allocation). A missing
// file is an error wrapping fs.ErrNotExist.
func ReadLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, fi.Size(), max)
	}
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	return b, nil
}
