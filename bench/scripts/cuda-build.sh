#!/usr/bin/env bash
# cuda-build.sh — compile-check the `cuda` build of selectformer on a Debian 12
# host, GPU or not.
#
# It enables the non-free component of the Debian archive apt already uses
# (and contrib, where Debian keeps nvidia-support; as a separate sources file next to /etc/apt/sources.list.d/debian.sources),
# installs Debian's CUDA 11.8 development packages (nvidia-cuda-dev: headers,
# cuBLAS and the driver library to link against; 1.5 GB downloaded with its dependencies, 5.2 GB on disk) and
# runs `go vet -tags cuda ./share/...` and `go build -tags cuda ./...` with the
# CGO flags of Debian's layout. Run it as root (or with sudo) from anywhere in
# the repository. Not part of .ci/run: the default build never needs CUDA.
#
#   bench/scripts/cuda-build.sh            install if needed, then vet and build
#   SKIP_INSTALL=1 bench/scripts/cuda-build.sh   only vet and build
#
# With a GPU, bench/scripts/gpu.sh then runs the bit-exactness tests and the
# benchmarks.
set -euo pipefail

cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# The Debian packages put the CUDA headers in /usr/include and the libraries
# (libcuda.so, libcublas.so) in /usr/lib/x86_64-linux-gnu, where gcc looks
# anyway; /usr/include/cuda.h is the marker that they are installed.
have_cuda_dev() {
	[ -f /usr/include/cuda.h ] && [ -f /usr/include/cublas_v2.h ] &&
		ls /usr/lib/x86_64-linux-gnu/libcublas.so >/dev/null 2>&1 &&
		ls /usr/lib/x86_64-linux-gnu/libcuda.so >/dev/null 2>&1
}

install_cuda_dev() {
	local src=/etc/apt/sources.list.d/debian.sources
	local extra=/etc/apt/sources.list.d/selectformer-cuda-nonfree.sources
	if [ ! -f "$extra" ]; then
		# The same archive (URIs, suites, signing key) as the stanza of
		# debian.sources that serves "bookworm", with component non-free.
		local uris suites key
		if [ -f "$src" ]; then
			uris=$(awk 'BEGIN{RS=""} /Suites:[^\n]*bookworm( |$|\n)/ {print; exit}' "$src" | sed -n 's/^URIs: *//p')
			suites=$(awk 'BEGIN{RS=""} /Suites:[^\n]*bookworm( |$|\n)/ {print; exit}' "$src" | sed -n 's/^Suites: *//p')
			key=$(awk 'BEGIN{RS=""} /Suites:[^\n]*bookworm( |$|\n)/ {print; exit}' "$src" | sed -n 's/^Signed-By: *//p')
		fi
		uris=${uris:-http://deb.debian.org/debian}
		suites=${suites:-bookworm bookworm-updates}
		key=${key:-/usr/share/keyrings/debian-archive-keyring.gpg}
		echo "cuda-build: enabling non-free from $uris ($suites) in $extra"
		as_root tee "$extra" >/dev/null <<SRC
Types: deb
URIs: $uris
Suites: $suites
Components: contrib non-free
Signed-By: $key
SRC
	fi
	as_root env DEBIAN_FRONTEND=noninteractive nice -n 10 apt-get update -q
	# nvidia-cuda-dev: cuda.h, cublas_v2.h, libcublas.so, libcudart.so and
	# (through libcuda1 / libnvidia-...) libcuda.so. No nvcc: the cuda build
	# compiles only C through cgo, and gorgonia.org/cu needs no kernels.
	as_root env DEBIAN_FRONTEND=noninteractive nice -n 10 apt-get install -y -q --no-install-recommends \
		nvidia-cuda-dev libcuda1
	if ! ls /usr/lib/x86_64-linux-gnu/libcuda.so >/dev/null 2>&1; then
		# libcuda1 ships libcuda.so.1 only; the link needs the bare name.
		as_root ln -s libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so
	fi
}

if [ "${SKIP_INSTALL:-0}" != 1 ] && ! have_cuda_dev; then
	install_cuda_dev
fi
have_cuda_dev || { echo "cuda-build: CUDA headers or libraries missing after install" >&2; exit 1; }

export CGO_ENABLED=1
export CGO_CFLAGS="${CGO_CFLAGS:-} -I/usr/include"
export CGO_LDFLAGS="${CGO_LDFLAGS:-} -L/usr/lib/x86_64-linux-gnu"

echo "cuda-build: $(dpkg-query -W -f '${Package} ${Version}\n' nvidia-cuda-dev 2>/dev/null || echo 'nvidia-cuda-dev (not from dpkg)')"
echo "cuda-build: go vet -tags cuda ./share/..."
nice -n 10 go vet -tags cuda ./share/...
echo "cuda-build: go build -tags cuda ./..."
nice -n 10 go build -tags cuda ./...
echo "cuda-build: go test -tags cuda -c ./share (test binary links)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nice -n 10 go test -tags cuda -c -o "$tmp/share.test" ./share
echo "cuda-build: ok"
