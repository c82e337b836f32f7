package sessiontest

import (
	"bytes"
	"io"
	"testing"

	"github.com/selectformer/selectformer/selection/purchase"
)

// RewriteBundle returns the bundle b with every record passed through
// edit: a dishonest delivery made from an honest one (the purchase tests
// of selection and of the binaries).
func RewriteBundle(t testing.TB, b []byte, edit func(purchase.Opening) purchase.Opening) []byte {
	t.Helper()
	r, err := purchase.NewBundleReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, err := purchase.NewBundleWriter(&out, r.Header())
	if err != nil {
		t.Fatal(err)
	}
	for {
		op, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(edit(op)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
