#!/usr/bin/env bash
# ring-kernels.sh — time every ring GEMM micro-kernel this CPU can run
# (share.RingKernels: avx512-vpmullq, avx512-ifma, avx512-vpmuludq,
# avx2-vpmulld, arm64-madd, generic), alone and in the sst2 proxy's products,
# and the AES-CTR key stream on each path (crypto-aes, vaes256, vaes512),
# then the sst2-distilbert sample run without a link (the compute bound's
# run) once per kernel, forced with SELECTFORMER_RING_KERNEL. Meant for the
# CPUs bench/RESULTS.md only projects ("Ring GEMM kernels by CPU"): run it
# there and the projection becomes a measurement.
#
#   bench/scripts/ring-kernels.sh                  benchmarks + one sample run per kernel
#   COUNT=10 SAMPLES=512 bench/scripts/ring-kernels.sh
#   SKIP_SELECT=1 bench/scripts/ring-kernels.sh    benchmarks only
#   SKIP_BENCH=1 WORKLOAD=tiny SAMPLES=40 bench/scripts/ring-kernels.sh   sample runs only (a smoke test)
#   NO_AVX512=1 bench/scripts/ring-kernels.sh      as a host without AVX-512 (GODEBUG=cpu.avx512f=off)
#
# Prints the CPU (model name, threads per core: two vCPUs that are
# hyperthreads of one core make each CPU-second worth less, AVX-512 flags),
# the benchmarks' MAC/s and, on Linux, MAC/CPU-s (per second of the
# thread's or process's own CPU time: a per-core rate that other processes
# sharing the cores do not lower), and per kernel the sample run's wall and
# CPU seconds (user + system) with the CPU line mpcbench prints (it names the
# kernel). A kernel the CPU cannot run is reported as such. Run it on a quiet
# machine, and say if it was not (the load average is printed).
set -euo pipefail

cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
count=${COUNT:-5}
if [ "${NO_AVX512:-0}" = 1 ]; then
	export GODEBUG="${GODEBUG:+$GODEBUG,}cpu.avx512f=off"
fi
samples=${SAMPLES:-512}
workload=${WORKLOAD:-sst2-distilbert}

echo "## Ring GEMM kernels on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
date -u '+%Y-%m-%d %H:%M UTC'
lscpu 2>/dev/null | grep -E '^(Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|CPU\(s\)):' || true
echo "AVX-512 flags: $(grep -m1 -o -w -E 'avx512(f|dq|ifma|vl)' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "AVX2, VAES: $(grep -m1 -E '^flags' /proc/cpuinfo | grep -o -w -E 'avx2|vaes' | sort -u | tr '\n' ' ')${GODEBUG:+ (GODEBUG=$GODEBUG)}"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

if [ "${SKIP_BENCH:-0}" != 1 ]; then
	go test -run '^$' -bench 'MicroKernels|RingKernels|AESCTR' -count "$count" ./share/ | grep -E '^(Benchmark|cpu:)'
fi

if [ "${SKIP_SELECT:-0}" = 1 ]; then
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/mpcbench" ./bench/cmd/mpcbench
echo
echo "sample run: mpcbench select --workload $workload --samples $samples --link none, per kernel"
TIMEFORMAT='%R %U %S'
for k in avx512-vpmullq avx512-ifma avx512-vpmuludq avx2-vpmulld arm64-madd generic; do
	log="$tmp/$k.log"
	if { time SELECTFORMER_RING_KERNEL=$k "$tmp/mpcbench" select --workload "$workload" --samples "$samples" --link none >"$log" 2>&1; } 2>"$tmp/time"; then
		read -r wall user sys <"$tmp/time"
		echo "$k: $(awk -v w="$wall" -v u="$user" -v s="$sys" 'BEGIN{printf "%.1f s wall, %.1f s CPU (user + system)", w, u+s}'); $(grep -m1 -o 'CPU .*' "$log")"
	else
		echo "$k: not run here: $(grep -m1 -o 'SELECTFORMER_RING_KERNEL[^;]*' "$log" || tail -1 "$log")"
	fi
done
