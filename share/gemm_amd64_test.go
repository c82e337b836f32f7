//go:build !purego

package share

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestAVX512Selected checks the kernel installed at start-up: the automatic
// choice for this CPU (VPMULLQ on AMD with AVX-512 F+DQ, IFMA on other
// vendors with IFMA, the AVX2 kernel without AVX-512 but with AVX2, generic
// without either), unless RingKernelEnv forces one; and that CPUID's vendor
// matches /proc/cpuinfo's where there is one.
func TestAVX512Selected(t *testing.T) {
	if f, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(f)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "vendor_id" {
				if got := strings.TrimSpace(v); got != thisCPU.vendor {
					t.Fatalf("CPUID vendor %q, /proc/cpuinfo vendor_id %q", thisCPU.vendor, got)
				}
				break
			}
		}
	}
	if thisCPU.avx2 != cpu.X86.HasAVX2 || thisCPU.avx512F != cpu.X86.HasAVX512F || thisCPU.avx512DQ != cpu.X86.HasAVX512DQ || thisCPU.avx512IFMA != cpu.X86.HasAVX512IFMA {
		t.Fatalf("detected %v, x/sys/cpu says F %v DQ %v IFMA %v", thisCPU, cpu.X86.HasAVX512F, cpu.X86.HasAVX512DQ, cpu.X86.HasAVX512IFMA)
	}
	want := "generic"
	amd := thisCPU.vendor == "AuthenticAMD" || thisCPU.vendor == "HygonGenuine"
	switch {
	case !amd && cpu.X86.HasAVX512F && cpu.X86.HasAVX512IFMA:
		want = "avx512-ifma"
	case cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ:
		want = "avx512-vpmullq"
	case cpu.X86.HasAVX2:
		want = "avx2-vpmulld"
	}
	if env := os.Getenv(RingKernelEnv); env != "" && env != "auto" {
		t.Skipf("%s=%s forces the kernel", RingKernelEnv, env)
	}
	if got := RingKernel(); got != want {
		t.Fatalf("kernel %s installed on %v, want %s", got, thisCPU, want)
	}
	if want == "generic" {
		t.Skip("CPU lacks AVX2 and AVX-512: the assembly kernels are not tested here")
	}
}

// TestResolveRingKernel checks the automatic choice and the parsing of
// RingKernelEnv on CPUs described by hand: Intel with and without IFMA, AMD
// Zen 4 with IFMA, AMD Zen 3 and Zen 4 with AVX2 but no AVX-512 (a VM that
// hides it), a CPU with neither.
func TestResolveRingKernel(t *testing.T) {
	emerald := cpuInfo{vendor: "GenuineIntel", family: 6, model: 207, avx2: true, avx512F: true, avx512DQ: true, avx512IFMA: true}
	skylakeX := cpuInfo{vendor: "GenuineIntel", family: 6, model: 85, avx2: true, avx512F: true, avx512DQ: true}
	zen4 := cpuInfo{vendor: "AuthenticAMD", family: 25, model: 17, avx2: true, avx512F: true, avx512DQ: true, avx512IFMA: true}
	zen4VM := cpuInfo{vendor: "AuthenticAMD", family: 25, model: 17, avx2: true}
	zen3 := cpuInfo{vendor: "AuthenticAMD", family: 25, model: 1, avx2: true}
	old := cpuInfo{vendor: "AuthenticAMD", family: 23, model: 49}
	for _, tc := range []struct {
		cpu     cpuInfo
		env     string
		want    string
		wantErr string
	}{
		{emerald, "", "avx512-ifma", ""},
		{emerald, "auto", "avx512-ifma", ""},
		{skylakeX, "", "avx512-vpmullq", ""},
		{zen4, "", "avx512-vpmullq", ""},
		{zen4, "  Auto\n", "avx512-vpmullq", ""},
		{old, "", "generic", ""},
		{zen3, "", "avx2-vpmulld", ""},
		{zen4VM, "auto", "avx2-vpmulld", ""},
		{zen4VM, "generic", "generic", ""},
		{zen4, "AVX2-VPMULLD", "avx2-vpmulld", ""},
		{emerald, "avx2-vpmulld", "avx2-vpmulld", ""},
		{zen3, "avx512-vpmullq", "avx2-vpmulld", "cannot run"},
		{old, "avx2-vpmulld", "generic", "cannot run"},
		{zen3, "arm64-madd", "avx2-vpmulld", "no such ring GEMM kernel"},
		{emerald, "avx512-vpmullq", "avx512-vpmullq", ""},
		{emerald, "AVX512-VPMULUDQ", "avx512-vpmuludq", ""},
		{emerald, "generic", "generic", ""},
		{zen4, "avx512-ifma", "avx512-ifma", ""},
		{zen4, "avx512-vpmuludq", "avx512-vpmuludq", ""},
		{skylakeX, "avx512-ifma", "avx512-vpmullq", "cannot run"},
		{old, "avx512-vpmullq", "generic", "cannot run"},
		{old, "avx512-vpmuludq", "generic", "cannot run"},
		{zen4, "ifma", "avx512-vpmullq", "no such ring GEMM kernel"},
		{emerald, "avx512", "avx512-ifma", "no such ring GEMM kernel"},
	} {
		impl, err := resolveRingKernel(tc.env, tc.cpu)
		if impl.name != tc.want {
			t.Errorf("%v, %q: kernel %s, want %s", tc.cpu, tc.env, impl.name, tc.want)
		}
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%v, %q: unexpected error %v", tc.cpu, tc.env, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), RingKernelEnv)):
			t.Errorf("%v, %q: error %v, want one naming %s and saying %q", tc.cpu, tc.env, err, RingKernelEnv, tc.wantErr)
		}
	}
}

// TestCPUFamilyModel decodes CPUID leaf 1 signatures of known parts.
func TestCPUFamilyModel(t *testing.T) {
	for _, tc := range []struct {
		eax           uint32
		family, model int
	}{
		{0x000c06f2, 6, 207}, // Emerald Rapids
		{0x000806f8, 6, 143}, // Sapphire Rapids
		{0x00050657, 6, 85},  // Cascade Lake
		{0x00a10f11, 25, 17}, // Zen 4 (Genoa)
		{0x00b00f21, 26, 2},  // Zen 5 (Turin)
		{0x00000f41, 15, 4},  // Pentium 4: family 15 without extension
		{0x00100f22, 16, 2},  // family 10h: extended family, extended model
	} {
		if f, m := cpuFamilyModel(tc.eax); f != tc.family || m != tc.model {
			t.Errorf("%#x: family %d model %d, want %d %d", tc.eax, f, m, tc.family, tc.model)
		}
	}
}

// TestAVX512Masked runs this test binary again with AVX-512 masked off
// (GODEBUG=cpu.avx512f=off, which x/sys/cpu honours) and checks what an
// AVX-512 machine then does, as a host without AVX-512 would: the AVX2
// kernel (generic without AVX2) and no 512-bit VAES key stream (256-bit
// VAES where the CPU has VAES and AVX2). On a CPU without AVX-512 it
// checks the same choice unmasked.
func TestAVX512Masked(t *testing.T) {
	if os.Getenv("SHARE_RING_KERNEL_CHILD") != "" {
		t.Skip("child run")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRingKernelEnvChild$", "-test.v")
	cmd.Env = append(os.Environ(), RingKernelEnv+"=", "SHARE_RING_KERNEL_CHILD=1", GEMMEnv+"=", "GODEBUG=cpu.avx512f=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child with AVX-512 masked: %v\n%s", err, out)
	}
	kernel, ctr := "generic", "crypto-aes"
	if cpu.X86.HasAVX2 {
		kernel = "avx2-vpmulld"
		if hasVAES() {
			ctr = "vaes256"
		}
	}
	if want := "kernel=" + kernel + ";"; !strings.Contains(string(out), want) {
		t.Fatalf("child with AVX-512 masked: want %s\n%s", want, out)
	}
	if want := "ctr=" + ctr + ";"; !strings.Contains(string(out), want) {
		t.Fatalf("child with AVX-512 masked: want %s\n%s", want, out)
	}
}
