#!/usr/bin/env bash
# gpu.sh — on a host with an NVIDIA GPU: prove the cuda GEMM backend
# bit-exact against the CPU ring GEMM, then time batched ring GEMMs
# C[b] = A[b]·W (128×768 · 768×2304, batches of 16 and 64) on the CPU and on
# the GPU, and write the figures as a Markdown section for bench/RESULTS.md.
#
#   bench/scripts/gpu.sh                 tests + benchmarks, figures to bench/gpu-figures.md
#   OUT=path COUNT=5 bench/scripts/gpu.sh
#   LIMB=1 bench/scripts/gpu.sh          also time limb-gonum (the limb method on
#                                        gonum's CPU Dgemm; ~1 min per product on 2 cores)
#   INSTALL=1 bench/scripts/gpu.sh       first run cuda-build.sh (Debian's CUDA 11.8
#                                        packages; only where the NVIDIA driver is
#                                        Debian's own, whose libcuda1 they install)
#
# Needs Go ≥ the go.mod version, the NVIDIA driver (libcuda.so.1, nvidia-smi)
# and the CUDA headers and cuBLAS: /usr/local/cuda (NVIDIA's toolkit) or
# /usr/include (Debian's nvidia-cuda-dev).
set -euo pipefail

cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
out=${OUT:-bench/gpu-figures.md}
count=${COUNT:-3}

if [ "${INSTALL:-0}" = 1 ]; then
	bench/scripts/cuda-build.sh
fi
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "gpu.sh: no NVIDIA GPU or driver here (nvidia-smi fails); bench/scripts/cuda-build.sh checks the build without one" >&2
	exit 1
fi

export CGO_ENABLED=1
cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [ -f "$cuda_home/include/cuda.h" ]; then
	export CGO_CFLAGS="${CGO_CFLAGS:-} -I$cuda_home/include"
	export CGO_LDFLAGS="${CGO_LDFLAGS:-} -L$cuda_home/lib64 -L$cuda_home/lib64/stubs"
elif [ -f /usr/include/cuda.h ]; then
	export CGO_LDFLAGS="${CGO_LDFLAGS:-} -L/usr/lib/x86_64-linux-gnu"
else
	echo "gpu.sh: no cuda.h under $cuda_home/include or /usr/include: install the CUDA toolkit (or INSTALL=1 on Debian)" >&2
	exit 1
fi

gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
cores=$(nproc)
echo "gpu.sh: GPU $gpu; CPU $cpu ($cores cores)"

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

# 1. Bit-exactness: the device path against the CPU ring GEMM. On a GPU host
# none of the device tests may skip.
echo "gpu.sh: go test -tags cuda (bit-exactness)"
go test -tags cuda -count=1 -v -run 'CUDA|Limb|GEMMBackend|ResolveGEMM' ./share/ | tee "$log/test.txt" | grep -E '^(--- |ok|FAIL|PASS)' || true
if ! grep -q '^ok' "$log/test.txt"; then
	echo "gpu.sh: tests failed" >&2
	exit 1
fi
if grep -E -- '--- SKIP: TestCUDA(BitExact|Batched|LongK|WeightCache)' "$log/test.txt"; then
	echo "gpu.sh: the device tests skipped: the cuda backend found no device (see the log above)" >&2
	exit 1
fi
# The protocols' products with the backend forced (small shapes run on the CPU
# below the backend's threshold; this checks that forcing cuda opens).
SELECTFORMER_GEMM=cuda go test -tags cuda -count=1 -run 'MatMul' ./protocol/

# 2. Benchmarks.
pattern='BatchedGEMM/(cpu|cuda)/'
[ "${LIMB:-0}" = 1 ] && pattern='BatchedGEMM/(cpu|cuda|limb-gonum)/'
echo "gpu.sh: go test -tags cuda -bench '$pattern' -count $count"
go test -tags cuda -run '^$' -bench "$pattern" -count "$count" ./share/ | tee "$log/bench.txt"

# Median MAC/s of each sub-benchmark, in G ("n/a" where it did not run: grep
# finds nothing, which must not end the script under pipefail).
median() {
	{ grep "^BenchmarkBatchedGEMM/$1-" "$log/bench.txt" || true; } | awk '{for (i = 2; i <= NF; i++) if ($i == "MAC/s") print $(i-1)}' |
		sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "n/a"; else printf "%.3g", v[int((NR + 1) / 2)] / 1e9}'
}
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {if (a == "n/a" || b == "n/a" || b == 0) print "n/a"; else printf "%.0f×", a / b}'
}
c16=$(median cpu/x16) c64=$(median cpu/x64) g16=$(median cuda/x16) g64=$(median cuda/x64)
l16=$(median limb-gonum/x16)
{
	echo "## Ring GEMM on the GPU (\`share\`, cuda backend)"
	echo "\`bench/scripts/gpu.sh\` ($(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD)): GPU $gpu; CPU $cpu, $cores cores."
	echo "Bit-exactness tests (\`go test -tags cuda -run 'CUDA|Limb' ./share/\`): passed on this GPU."
	echo
	echo "| C[b] = A[b]·W, 128×768 · 768×2304, ring MAC/s (median of $count) | ×16 | ×64 |"
	echo "|---|---|---|"
	echo "| CPU ring GEMM (\`cpu\`) | ${c16} G | ${c64} G |"
	[ "$l16" != n/a ] && echo "| limb method on gonum Dgemm (\`limb-gonum\`) | ${l16} G | — |"
	echo "| GPU, limb method on cuBLAS Dgemm (\`cuda\`) | ${g16} G | ${g64} G |"
	echo "| GPU / CPU | $(ratio "$g16" "$c16") | $(ratio "$g64" "$c64") |"
	echo
	echo "The GPU figures include splitting A into limbs on the host, the transfers both ways and the"
	echo "recombination; W's limbs stay on the device (uploaded once, before the timing)."
} >"$out"
echo "gpu.sh: figures for bench/RESULTS.md in $out:"
cat "$out"
