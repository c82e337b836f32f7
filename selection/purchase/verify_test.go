package purchase

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// bundleOf writes the bundle of the candidates idx of tr as the records
// given by edit (nil: the honest records), returning its bytes.
func bundleOf(t *testing.T, tr *Tree, idx []int, edit func([]Opening) []Opening) []byte {
	t.Helper()
	var ops []Opening
	for _, i := range idx {
		op, err := tr.Open(i)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	if edit != nil {
		ops = edit(ops)
	}
	b := appendHeader(nil, Header{Root: tr.Root(), PoolSize: tr.Len(), Count: len(ops)})
	for _, op := range ops {
		b = AppendOpening(b, op)
	}
	return b
}

// problems returns "index:problem" for every item of the report with one.
func problems(r *Report) []string {
	var out []string
	for _, it := range append(slices.Clone(r.Items), r.Extra...) {
		if it.Problem != "" {
			out = append(out, strings.Join([]string{itoa(it.Index), it.Problem}, ":"))
		}
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestVerify writes the bundle of a purchase and verifies it: the honest
// one (WriteBundle's) passes; a partial one, a reordered one, one with an
// altered item, one with an item of another pool (same size, same
// position), one with a record too many and a cut one each fail, naming
// exactly the candidates concerned; a bundle of another session is refused
// before any record is read.
func TestVerify(t *testing.T) {
	const n = 100
	poolA := randomItems(n, 30, 1)
	poolB := randomItems(n, 30, 2)
	tr, _ := Commit(poolA, seedOf(7))
	bought := []int{3, 10, 11, 40, 77, 99}
	want := Expect{Root: tr.Root(), PoolSize: n, Indices: bought}

	var honest bytes.Buffer
	if err := WriteBundle(&honest, tr, bought, Format{}); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(bytes.NewReader(honest.Bytes()), want, nil)
	if err != nil || !rep.OK() || rep.Verified != len(bought) {
		t.Fatalf("honest bundle: %v, %+v", err, rep)
	}

	// Another session: the same pool committed under another seed.
	other, _ := Commit(poolA, seedOf(8))
	var foreign bytes.Buffer
	if err := WriteBundle(&foreign, other, bought, Format{}); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(&foreign, want, nil); !errors.Is(err, ErrForeignBundle) || rep.OK() {
		t.Fatalf("a foreign session's bundle: %v", err)
	}

	swapB := func(pos ...int) func([]Opening) []Opening {
		return func(ops []Opening) []Opening {
			for _, p := range pos {
				ops[p].Item = poolB[ops[p].Index]
			}
			return ops
		}
	}
	for _, c := range []struct {
		name    string
		edit    func([]Opening) []Opening
		want    []string
		readErr bool
	}{
		{"partial", func(ops []Opening) []Opening { return append(ops[:2:2], ops[3:]...) }, []string{"11:" + ProblemMissing}, false},
		{"reordered", func(ops []Opening) []Opening { ops[1], ops[2] = ops[2], ops[1]; return ops }, []string{"10:" + ProblemOutOfOrder}, false},
		{"pool B items", swapB(1, 4), []string{"10:" + ProblemAltered, "77:" + ProblemAltered}, false},
		{"tampered byte", func(ops []Opening) []Opening {
			ops[5].Item = append([]byte{}, ops[5].Item...)
			ops[5].Item[0] ^= 1
			return ops
		}, []string{"99:" + ProblemAltered}, false},
		{"extra record", func(ops []Opening) []Opening {
			op, _ := tr.Open(50)
			return append(ops[:4:4], append([]Opening{op}, ops[4:]...)...)
		}, []string{"50:" + ProblemNotPurchased}, false},
		{"twice", func(ops []Opening) []Opening { return append(ops, ops[5]) }, []string{"99:" + ProblemTwice}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := bundleOf(t, tr, bought, c.edit)
			rep, err := Verify(bytes.NewReader(b), want, nil)
			if (err != nil) != c.readErr {
				t.Fatalf("error %v", err)
			}
			if got := problems(rep); !slices.Equal(got, c.want) || rep.OK() {
				t.Fatalf("problems %q, want %q", got, c.want)
			}
		})
	}
	// Cut inside the fourth record: the first three verify, the rest are
	// unread, and the error says the bundle broke off.
	b := bundleOf(t, tr, bought, nil)
	cut := bundleHeaderLen + 3*(len(b)-bundleHeaderLen)/len(bought) + 10
	rep, err = Verify(bytes.NewReader(b[:cut]), want, nil)
	if !errors.Is(err, io.ErrUnexpectedEOF) || rep == nil || rep.Verified > 3 || rep.Items[5].Problem != ProblemUnread {
		t.Fatalf("a cut bundle: %v, %+v", err, rep)
	}
	// Data after the last record.
	if _, err := Verify(bytes.NewReader(append(b, 0)), want, nil); err == nil {
		t.Fatal("a bundle with trailing data verifies")
	}
}

// TestBundleHeaderBounds: a header announcing more records than the pool,
// an empty pool, an unknown kind or an image shape out of bounds is
// refused before any record is read; an image record of another size than
// the header's is refused.
func TestBundleHeaderBounds(t *testing.T) {
	for name, h := range map[string]Header{
		"records beyond the pool": {PoolSize: 4, Count: 5},
		"empty pool":              {PoolSize: 0},
		"unknown kind":            {PoolSize: 4, Format: Format{Kind: 9}},
		"image of width 0":        {PoolSize: 4, Format: Format{Kind: KindImages, Height: 2, Channels: 1}},
		"image of 5 channels":     {PoolSize: 4, Format: Format{Kind: KindImages, Width: 2, Height: 2, Channels: 5}},
		"texts with a shape":      {PoolSize: 4, Format: Format{Kind: KindTexts, Width: 2}},
	} {
		if _, err := NewBundleReader(bytes.NewReader(appendHeader(nil, h))); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	items := ByteItems{{1, 2, 3, 4}, {5, 6, 7}}
	tr, _ := Commit(items, seedOf(1))
	op, _ := tr.Open(1)
	b := AppendOpening(appendHeader(nil, Header{Root: tr.Root(), PoolSize: 2, Count: 1, Format: Format{Kind: KindImages, Width: 2, Height: 2, Channels: 1}}), op)
	r, err := NewBundleReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err == nil {
		t.Fatal("an image of 3 bytes in a bundle of 2×2 images is read")
	}
	var w bytes.Buffer
	if err := WriteBundle(&w, tr, []int{1}, Format{Kind: KindImages, Width: 2, Height: 2, Channels: 1}); err == nil {
		t.Fatal("WriteBundle writes an item of another size than the format's")
	}
}

// madeItems are n candidates of size bytes made from their index on
// demand: a large pool that takes no memory.
type madeItems struct{ n, size int }

func (m madeItems) Len() int { return m.n }
func (m madeItems) AppendItem(dst []byte, i int) ([]byte, error) {
	n := len(dst)
	dst = append(dst, make([]byte, m.size)...)
	binary.LittleEndian.PutUint64(dst[n:], uint64(i))
	return dst, nil
}

// TestVerifyStreams verifies a 32 MiB bundle streamed through a pipe from
// the data owner's writer (its items made on demand) while sampling the
// heap, the collector set to run at 20% growth: the heap grows by a few
// items' worth, not by the bundle (a verifier that read the bundle whole
// would hold all of it).
func TestVerifyStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("32 MiB through a pipe")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(20))
	const n, size = 1024, 32 << 10
	items := madeItems{n, size}
	tr, _ := Commit(items, seedOf(4))
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(WriteBundle(pw, tr, all, Format{})) }()
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
		}
	}()
	rep, err := Verify(pr, Expect{Root: tr.Root(), PoolSize: n, Indices: all}, nil)
	close(stop)
	<-done
	if err != nil || !rep.OK() {
		t.Fatalf("%v %+v", err, rep)
	}
	grew := int64(peak.Load()) - int64(base.HeapInuse)
	t.Logf("verified %d MiB streamed; the heap grew by at most %.1f MiB", n*size>>20, float64(grew)/(1<<20))
	if grew > 8<<20 {
		t.Fatalf("the heap grew by %d MiB verifying a %d MiB bundle", grew>>20, n*size>>20)
	}
}
