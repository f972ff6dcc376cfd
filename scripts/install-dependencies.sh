#!/usr/bin/env bash
# Installs the Debian 12 packages dlscale needs to build, run and test, and only those missing.
# Nothing calls apt-get when everything is present (a normal user on a prepared cluster), or on a
# system without dpkg, where CMake's find_package reports anything missing instead. Where a CUDA
# toolkit is (nvcc), it also fetches the pinned cuDNN frontend headers that the GPU module's
# graph-API convolutions compile against (scripts/fetch-cudnn-frontend.sh; once, with pip); the
# CPU build never needs them, and a CUDA build without them leaves that path out.
set -euo pipefail

packages=(
  cmake g++ make git pkg-config
  libopenmpi-dev openmpi-bin
  libhdf5-dev hdf5-tools
  libboost-program-options-dev
  libspdlog-dev libfmt-dev
  libopenblas-openmp-dev
  libdnnl-dev ocl-icd-opencl-dev   # Debian's oneDNN CMake config asks for OpenCL
  libgtest-dev
  python3 python3-h5py python3-numpy python3-pandas
  python3-matplotlib fonts-dejavu-core   # dlscale report: figures
)
# Tools only some tests use. Without root or sudo they are left out with a warning, and the
# tests that need them report themselves skipped (never passed).
test_tools=(
  chromium          # the report test renders the HTML page headless
  slurm-wlm munge   # the Slurm scripts are tested on a private local Slurm
)

install_packages() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "install-dependencies: no dpkg here; assuming the libraries are installed (CMake will say if not)"
    return 0
  fi

  missing_of() {
    local package status
    for package in "$@"; do
      status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
      [[ "$status" == "install ok installed" ]] || echo "$package"
    done
  }
  mapfile -t missing_required < <(missing_of "${packages[@]}")
  mapfile -t missing_tools < <(missing_of "${test_tools[@]}")
  missing=("${missing_required[@]}" "${missing_tools[@]}")

  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "install-dependencies: all $((${#packages[@]} + ${#test_tools[@]})) packages present"
    return 0
  fi

  if [[ $(id -u) -eq 0 ]]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  elif [[ ${#missing_required[@]} -eq 0 ]]; then
    echo "install-dependencies: warning: no root or sudo to install the test tools ${missing_tools[*]};" \
         "the tests that need them will be reported as skipped" >&2
    return 0
  else
    echo "install-dependencies: error: missing packages (${missing_required[*]}) and no root or sudo to install them" >&2
    return 1
  fi
  echo "install-dependencies: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

fetch_cudnn_frontend() {
  if [[ -x /usr/local/cuda/bin/nvcc ]] || command -v nvcc >/dev/null 2>&1; then
    "$(dirname "${BASH_SOURCE[0]}")/fetch-cudnn-frontend.sh" ||
      echo "install-dependencies: warning: could not fetch the cuDNN frontend; the CUDA build" \
           "will leave the graph-API convolutions out" >&2
  fi
}

install_packages
fetch_cudnn_frontend
