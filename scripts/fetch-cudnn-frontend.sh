#!/usr/bin/env bash
# Fetches NVIDIA's cuDNN frontend (header-only C++, cudnn_frontend.h), which the CUDA device's
# graph-API convolutions are built with (kernels/cuda/cudnn_graph_convolution.cpp), into the
# git-ignored folder .cudnn-frontend/include, where CMake (cmake/FindCudnnFrontend.cmake) finds it.
#
# usage: scripts/fetch-cudnn-frontend.sh [--help]
#
# One pinned version, from one pinned file: the PyPI wheel of nvidia-cudnn-frontend 1.20.0 for
# CPython 3.11 on manylinux_2_28 x86_64 (the headers are the same in every wheel of a version;
# naming one file makes its sha256 checkable). The wheel is downloaded with pip (--no-deps, no
# install), checked against its sha256, and only its include/ folder is unpacked. Its headers are
# those of the v1.20.0 tag of github.com/NVIDIA/cudnn-frontend. Nothing is done when the pinned
# version is already there. The CPU build never needs it; a CUDA build without it leaves the graph
# path out and says so at configure time.
# Environment: PYTHON (default python3), for pip.
set -euo pipefail

if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
elif (($#)); then
  echo "fetch-cudnn-frontend: unknown argument $1 (see --help)" >&2
  exit 2
fi

version=1.20.0
wheel=nvidia_cudnn_frontend-$version-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
sha256=5e1101a7fb810c62fd52a2a3beeeda85ea611e49ae18844044e63b1ea31a7b23

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD/.cudnn-frontend
stamp=$root/include/.version

if [[ -f $stamp && $(<"$stamp") == "$version" ]]; then
  echo "fetch-cudnn-frontend: cuDNN frontend $version already in $root/include"
  exit 0
fi

python=${PYTHON:-python3}
mkdir -p "$root/wheel"
if [[ ! -f $root/wheel/$wheel ]]; then
  "$python" -m pip download --quiet --no-deps --only-binary=:all: --implementation cp \
    --python-version 3.11 --platform manylinux_2_28_x86_64 \
    --dest "$root/wheel" "nvidia-cudnn-frontend==$version"
fi
if [[ $(sha256sum "$root/wheel/$wheel" | cut -d' ' -f1) != "$sha256" ]]; then
  echo "fetch-cudnn-frontend: $root/wheel/$wheel does not have the pinned sha256 $sha256" >&2
  rm -f "$root/wheel/$wheel"
  exit 1
fi

# A wheel is a zip archive; Python unpacks it where unzip is missing.
rm -rf "$root/include" "$root/include.tmp"
mkdir -p "$root/include.tmp"
"$python" - "$root/wheel/$wheel" "$root/include.tmp" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    members = [name for name in wheel.namelist() if name.startswith("include/")]
    wheel.extractall(sys.argv[2], members)
EOF
mv "$root/include.tmp/include" "$root/include"
rm -rf "$root/include.tmp"
minor=$(cut -d. -f2 <<<"$version")
if ! grep -qE "CUDNN_FRONTEND_MINOR_VERSION +$minor\b" "$root/include/cudnn_frontend_version.h"; then
  echo "fetch-cudnn-frontend: the wheel's cudnn_frontend_version.h is not version $version" >&2
  exit 1
fi
echo "$version" >"$stamp"
echo "fetch-cudnn-frontend: cuDNN frontend $version in $root/include"
