package share

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// packPanels packs the mr×kc block a (row-major) and the kc×nr block b
// (row-major) into impl's panel layout.
func packPanels(impl *gemmImpl, a, b []uint64, kc int) (ap, bp []uint64) {
	w := impl.words()
	ap = make([]uint64, impl.mr*kc*w)
	bp = make([]uint64, impl.nr*kc*w)
	packA(ap, matView{data: a, rs: kc, cs: 1}, impl.mr, kc, impl.mr)
	packB(bp, matView{data: b, rs: impl.nr, cs: 1}, kc, impl.nr, impl.nr)
	if w == 2 {
		splitWords(ap, impl.mr*kc, impl.mr, impl.split)
		splitWords(bp, impl.nr*kc, impl.nr, impl.split)
	}
	return ap, bp
}

// TestMicroKernels calls every kernel's micro-kernel directly, with depths
// around its k block and the IFMA kernel's 256-term limit (600 runs the
// IFMA kernel in three calls), in store and add mode, on a tile inside a
// wider C, against the naive product.
func TestMicroKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, impl := range gemmKernels() {
		for _, kc := range []int{0, 1, 2, 3, 127, 128, 129, 255, 256, 257, 600} {
			for _, mode := range []string{"full", "edge", "ones", "top"} {
				t.Run(fmt.Sprintf("%s/kc%d/%s", impl.name, kc, mode), func(t *testing.T) {
					mr, nr := impl.mr, impl.nr
					a := randWords(rng, mr*kc, mode)
					b := randWords(rng, kc*nr, mode)
					want := naiveMatMul(a, b, mr, kc, nr)
					ap, bp := packPanels(impl, a, b, kc)
					ldc := nr + 5
					c := randWords(rng, mr*ldc, "full")
					orig := slices.Clone(c)
					impl.micro(kc, ap, bp, c, ldc, false)
					for i := range mr {
						if got := c[i*ldc : i*ldc+nr]; !slices.Equal(got, want[i*nr:(i+1)*nr]) {
							t.Fatalf("store, row %d: got %v…, want %v…", i, head(got), head(want[i*nr:]))
						}
						if got := c[i*ldc+nr : i*ldc+ldc]; !slices.Equal(got, orig[i*ldc+nr:i*ldc+ldc]) {
							t.Fatalf("store wrote outside the tile in row %d", i)
						}
					}
					copy(c, orig)
					impl.micro(kc, ap, bp, c, ldc, true)
					for i := range mr {
						for j := range nr {
							if got, w := c[i*ldc+j], orig[i*ldc+j]+want[i*nr+j]; got != w {
								t.Fatalf("add, c[%d][%d] = %#x, want %#x", i, j, got, w)
							}
						}
					}
				})
			}
		}
	}
}

// TestSplitWords checks the in-place expansion to two words per element
// against a direct construction.
func TestSplitWords(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, split := range []splitKind{splitHigh32, splitIFMA} {
		for _, r := range []int{1, 4, 16} {
			n := r * 7
			src := randWords(rng, n, "edge")
			buf := make([]uint64, 2*n)
			copy(buf, src)
			splitWords(buf, n, r, split)
			for g := range n / r {
				for i := range r {
					x := src[g*r+i]
					want := x >> 32
					if split == splitIFMA {
						want = x&0xfff | (x>>52)<<32
					}
					if buf[2*g*r+i] != x || buf[2*g*r+r+i] != want {
						t.Fatalf("split %d, r %d, group %d lane %d: got %#x, %#x; want %#x, %#x", split, r, g, i, buf[2*g*r+i], buf[2*g*r+r+i], x, want)
					}
				}
			}
		}
	}
}

// TestRingKernelSelectorPublicAPI forces every kernel this CPU can run
// through the selector and checks the exported products (MatMulInto,
// MatMulTransBInto, PackMatrix and MatMulPackedInto, BatchMatMulInto,
// BatchMatMulTransBInto) against the naive product, with RingKernel naming
// the kernel.
func TestRingKernelSelectorPublicAPI(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 17))
	for _, name := range RingKernels() {
		t.Run(name, func(t *testing.T) {
			restore, err := setRingKernel(name)
			if err != nil {
				t.Fatal(err)
			}
			defer restore()
			if got := RingKernel(); got != name {
				t.Fatalf("RingKernel() = %q after forcing %q", got, name)
			}
			for _, s := range []struct{ batch, m, k, n int }{
				{1, 1, 1, 1}, {2, 5, 0, 3}, {3, 9, 129, 33}, {1, 70, 300, 70}, {4, 17, 64, 31}, {2, 130, 257, 18},
			} {
				a := randWords(rng, s.batch*s.m*s.k, "edge")
				b := randWords(rng, s.batch*s.k*s.n, "full")
				want := make([]uint64, 0, s.batch*s.m*s.n)
				for i := range s.batch {
					want = append(want, naiveMatMul(a[i*s.m*s.k:(i+1)*s.m*s.k], b[i*s.k*s.n:(i+1)*s.k*s.n], s.m, s.k, s.n)...)
				}
				c := randWords(rng, s.batch*s.m*s.n, "full")
				must(t, BatchMatMulInto(c, a, b, s.batch, s.m, s.k, s.n))
				if !slices.Equal(c, want) {
					t.Fatalf("%v: BatchMatMulInto differs from the naive product", s)
				}
				bt := make([]uint64, 0, len(b))
				for i := range s.batch {
					bt = append(bt, transpose(b[i*s.k*s.n:(i+1)*s.k*s.n], s.k, s.n)...)
				}
				c = randWords(rng, s.batch*s.m*s.n, "full")
				must(t, BatchMatMulTransBInto(c, a, bt, s.batch, s.m, s.k, s.n))
				if !slices.Equal(c, want) {
					t.Fatalf("%v: BatchMatMulTransBInto differs from the naive product", s)
				}
				// The first batch element through the single products.
				a0, b0, want0 := a[:s.m*s.k], b[:s.k*s.n], want[:s.m*s.n]
				c0 := randWords(rng, s.m*s.n, "full")
				must(t, MatMulInto(c0, a0, b0, s.m, s.k, s.n))
				if !slices.Equal(c0, want0) {
					t.Fatalf("%v: MatMulInto differs from the naive product", s)
				}
				c0 = randWords(rng, s.m*s.n, "full")
				must(t, MatMulTransBInto(c0, a0, bt[:s.k*s.n], s.m, s.k, s.n))
				if !slices.Equal(c0, want0) {
					t.Fatalf("%v: MatMulTransBInto differs from the naive product", s)
				}
				pm, err := PackMatrix(b0, s.k, s.n)
				must(t, err)
				if pm.impl.name != name {
					t.Fatalf("PackMatrix packed for %q, want %q", pm.impl.name, name)
				}
				c0 = randWords(rng, s.m*s.n, "full")
				must(t, MatMulPackedInto(c0, a0, s.m, pm))
				if !slices.Equal(c0, want0) {
					t.Fatalf("%v: MatMulPackedInto differs from the naive product", s)
				}
			}
		})
	}
}

// TestRingKernelPackedKeepsItsKernel checks that a matrix packed under one
// kernel still multiplies correctly after another kernel is installed (the
// packed layout belongs to the kernel that packed it).
func TestRingKernelPackedKeepsItsKernel(t *testing.T) {
	names := RingKernels()
	rng := rand.New(rand.NewPCG(1, 9))
	a, b := randWords(rng, 9*200, "full"), randWords(rng, 200*40, "full")
	want := naiveMatMul(a, b, 9, 200, 40)
	for _, first := range names {
		restore, err := setRingKernel(first)
		must(t, err)
		pm, err := PackMatrix(b, 200, 40)
		restore()
		must(t, err)
		for _, second := range names {
			restore, err := setRingKernel(second)
			must(t, err)
			c := make([]uint64, 9*40)
			err = MatMulPackedInto(c, a, 9, pm)
			restore()
			must(t, err)
			if !slices.Equal(c, want) {
				t.Fatalf("packed under %s, multiplied under %s: differs from the naive product", first, second)
			}
		}
	}
}

// TestResolveRingKernelErrors checks the values of RingKernelEnv that must
// be rejected, on any build: a name that is not a kernel, and a kernel the
// CPU cannot run. Both leave the automatic choice and name the variable.
func TestResolveRingKernelErrors(t *testing.T) {
	none := cpuInfo{vendor: "GenuineIntel", family: 6, model: 85}
	for _, tc := range []struct{ env, wantErr string }{
		{"avx2", "no such ring GEMM kernel"},
		{"vpmullq", "no such ring GEMM kernel"},
		{"generic,avx512-ifma", "no such ring GEMM kernel"},
		{"avx512-ifma", ""}, // not compiled in (purego) or not runnable: either error
	} {
		impl, err := resolveRingKernel(tc.env, none)
		if err == nil {
			t.Fatalf("%q on a CPU without AVX-512: no error", tc.env)
		}
		if impl != genericKernel {
			t.Fatalf("%q on a CPU without AVX-512: fell back to %s, want generic", tc.env, impl.name)
		}
		if !strings.Contains(err.Error(), RingKernelEnv) || !strings.Contains(err.Error(), tc.wantErr) {
			t.Fatalf("%q: error %q should name %s and say %q", tc.env, err, RingKernelEnv, tc.wantErr)
		}
	}
	for _, env := range []string{"", "auto", " AUTO ", "generic", "Generic"} {
		impl, err := resolveRingKernel(env, none)
		if err != nil || impl != genericKernel {
			t.Fatalf("%q on a CPU without AVX-512: %v, %v; want generic", env, impl.name, err)
		}
	}
}

// TestRingKernelEnv runs this test binary again with RingKernelEnv set to
// every kernel the CPU can run, to "auto" and to a bogus name, and checks
// what the child reports: the forced kernel in use and exact products, or
// for the bogus name the automatic kernel, a log line, and an error from the
// cpu GEMM backend.
func TestRingKernelEnv(t *testing.T) {
	if os.Getenv("SHARE_RING_KERNEL_CHILD") != "" {
		t.Skip("child run")
	}
	auto := autoKernelName(thisCPU)
	cases := map[string]string{"auto": auto, "bogus-kernel": auto}
	for _, name := range RingKernels() {
		cases[name] = name
	}
	for env, want := range cases {
		t.Run(env, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestRingKernelEnvChild$", "-test.v")
			cmd.Env = append(os.Environ(), RingKernelEnv+"="+env, "SHARE_RING_KERNEL_CHILD=1", GEMMEnv+"=")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child with %s=%s: %v\n%s", RingKernelEnv, env, err, out)
			}
			if !strings.Contains(string(out), "kernel="+want+";") {
				t.Fatalf("child with %s=%s: want kernel %s\n%s", RingKernelEnv, env, want, out)
			}
			bogus := env == "bogus-kernel"
			_, report, _ := strings.Cut(string(out), "kernel="+want+";")
			report, _, _ = strings.Cut(report, "\n")
			if got := !strings.Contains(report, "gemm-error=<nil>") && strings.Contains(report, RingKernelEnv); got != bogus {
				t.Fatalf("child with %s=%s: GEMM() error reported: %v, want %v\n%s", RingKernelEnv, env, got, bogus, out)
			}
			if got := strings.Contains(string(out), "ring products outside the GEMM backend use "+auto); got != bogus {
				t.Fatalf("child with %s=%s: rejection logged: %v, want %v\n%s", RingKernelEnv, env, got, bogus, out)
			}
		})
	}
}

// TestRingKernelEnvChild is the child of TestRingKernelEnv: it reports the
// kernel in use and the cpu backend's error, and checks one product.
func TestRingKernelEnvChild(t *testing.T) {
	if os.Getenv("SHARE_RING_KERNEL_CHILD") == "" {
		t.Skip("run by TestRingKernelEnv")
	}
	rng := rand.New(rand.NewPCG(2, 3))
	a, b := randWords(rng, 21*150, "full"), randWords(rng, 150*35, "edge")
	c := make([]uint64, 21*35)
	must(t, MatMulInto(c, a, b, 21, 150, 35))
	if !slices.Equal(c, naiveMatMul(a, b, 21, 150, 35)) {
		t.Fatalf("kernel %s: MatMulInto differs from the naive product", RingKernel())
	}
	_, err := GEMM()
	fmt.Printf("kernel=%s; gemm-error=%v; ctr=%s;\n", RingKernel(), err, ctrPathNames[ctrPath])
}

// TestPackSplit checks the one-pass split packing (packASplit, packBSplit)
// against packing one word per element and splitting in place, for
// row-major and transposed sources, full and edge panels.
func TestPackSplit(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 1))
	for _, split := range []splitKind{splitHigh32, splitIFMA} {
		for _, s := range []struct{ rows, kc, cols int }{{4, 5, 16}, {9, 3, 35}, {3, 7, 15}, {8, 128, 32}, {1, 1, 1}} {
			x := randWords(rng, s.rows*s.kc, "edge")
			xt := transpose(x, s.rows, s.kc)
			for _, v := range []matView{{data: x, rs: s.kc, cs: 1}, {data: xt, rs: 1, cs: s.rows}} {
				want := make([]uint64, 2*roundUp(s.rows, 4)*s.kc)
				packA(want, v, s.rows, s.kc, 4)
				splitWords(want, roundUp(s.rows, 4)*s.kc, 4, split)
				got := make([]uint64, len(want))
				packASplit(got, v, s.rows, s.kc, 4, split)
				if !slices.Equal(got, want) {
					t.Fatalf("packASplit split %d %v cs %d differs", split, s, v.cs)
				}
			}
			y := randWords(rng, s.kc*s.cols, "edge")
			yt := transpose(y, s.kc, s.cols)
			for _, v := range []matView{{data: y, rs: s.cols, cs: 1}, {data: yt, rs: 1, cs: s.kc}} {
				want := make([]uint64, 2*roundUp(s.cols, 16)*s.kc)
				packB(want, v, s.kc, s.cols, 16)
				splitWords(want, roundUp(s.cols, 16)*s.kc, 16, split)
				got := make([]uint64, len(want))
				packBSplit(got, v, s.kc, s.cols, 16, split)
				if !slices.Equal(got, want) {
					t.Fatalf("packBSplit split %d %v cs %d differs", split, s, v.cs)
				}
			}
		}
	}
}

// TestSplitRows16 checks the full-panel split copy (assembly on AVX-512)
// against the portable loop, rows 37 words apart.
func TestSplitRows16(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, split := range []splitKind{splitHigh32, splitIFMA} {
		for _, kc := range []int{0, 1, 2, 129} {
			src := randWords(rng, max(kc, 1)*37, "edge")
			want := make([]uint64, 32*kc)
			got := make([]uint64, 32*kc)
			splitRows16Generic(want, src, 37, kc, split)
			splitRows16(got, src, 37, kc, split)
			if !slices.Equal(got, want) {
				t.Fatalf("split %d, kc %d: differs from the portable loop", split, kc)
			}
			for p := range kc {
				if want[32*p+3] != src[37*p+3] {
					t.Fatalf("split %d, kc %d: word (%d, 3) not copied", split, kc, p)
				}
			}
		}
	}
}

// TestCPUInfoString checks the CPU description RingKernelCPU gives.
func TestCPUInfoString(t *testing.T) {
	for _, tc := range []struct {
		c    cpuInfo
		want string
	}{
		{cpuInfo{vendor: "AuthenticAMD", family: 26, model: 2, avx512F: true, avx512DQ: true, avx512IFMA: true}, "AuthenticAMD family 26 model 2, AVX-512 F DQ IFMA"},
		{cpuInfo{vendor: "GenuineIntel", family: 6, model: 85, avx512F: true, avx512DQ: true}, "GenuineIntel family 6 model 85, AVX-512 F DQ"},
		{cpuInfo{vendor: "AuthenticAMD", family: 25, model: 1, avx2: true}, "AuthenticAMD family 25 model 1, AVX2, no AVX-512"},
		{cpuInfo{vendor: "AuthenticAMD", family: 25, model: 17, avx2: true, avx512F: true, avx512DQ: true}, "AuthenticAMD family 25 model 17, AVX2, AVX-512 F DQ"},
		{cpuInfo{}, "unknown vendor family 0 model 0, no AVX-512"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	if RingKernelCPU() != thisCPU.String() {
		t.Fatalf("RingKernelCPU() = %q, want %q", RingKernelCPU(), thisCPU.String())
	}
}

// TestGEMMDirect runs every kernel that can read B in place (gemmImpl.direct)
// both ways on every test shape, forced by its row limit: B in place
// (full panels unpacked, a partial last panel packed) and B packed, each
// against the naive product, with junk in c, for a row-major B (the direct
// path) and a transposed one (always packed).
func TestGEMMDirect(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 7))
	for _, impl := range gemmKernels() {
		if impl.direct == nil {
			continue
		}
		for _, rows := range []int{0, 1 << 30} {
			forced := *impl
			forced.directRows = rows
			for _, s := range gemmTestShapes {
				a := randWords(rng, s.m*s.k, "edge")
				b := randWords(rng, s.k*s.n, "full")
				want := naiveMatMul(a, b, s.m, s.k, s.n)
				for _, bv := range []matView{{data: b, rs: s.n, cs: 1}, {data: transpose(b, s.k, s.n), rs: 1, cs: s.k}} {
					c := randWords(rng, s.m*s.n, "full")
					gemmSerial(&forced, c, s.n, matView{data: a, rs: s.k, cs: 1}, bv, s.m, s.k, s.n)
					if !slices.Equal(c, want) {
						t.Fatalf("%s, direct rows ≤ %d, %v, B cs %d: differs from the naive product", impl.name, rows, s, bv.cs)
					}
				}
			}
		}
	}
}
