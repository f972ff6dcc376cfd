#!/usr/bin/env bash
# Packs the Debian 12 libraries that dlscale builds against and that a GPU machine (Ubuntu 24.04
# with CUDA, Open MPI, HDF5, NCCL and cuDNN, but no internet) lacks, into one relocatable archive:
#
#   .gpu-bundle/debs/           the downloaded .deb files (a cache: kept between runs)
#   .gpu-bundle/prefix/         those packages unpacked with `dpkg -x`, made relocatable
#   .gpu-bundle/gpu-deps.tar.xz the prefix, xz -9: carry it with the repository to the GPU machine,
#                               where scripts/gpu-check.sh unpacks it and builds against it
#
# The prefix also holds NVIDIA's cuDNN frontend headers (prefix/cudnn-frontend/include, 0.3 MiB of
# the archive), the pinned version scripts/fetch-cudnn-frontend.sh fetches with pip: the GPU
# module's graph-API convolutions (DLSCALE_CUDNN_API=graph) compile against them.
#
# usage: scripts/make-gpu-bundle.sh [--help]
# Needs apt-get, apt-cache, dpkg-deb, tar and xz (Debian 12, amd64); no root: `apt-get download`
# runs as any user. A .deb already in the cache, or in /var/cache/apt/archives, is not downloaded.
#
# What "relocatable" takes (everything else in these packages' CMake configs already computes its
# paths from its own location):
#   - OpenBLAS's CMake config and .pc files name /usr/...: rewritten to paths relative to themselves.
#   - OpenBLAS's generic names (lib/<arch>/cmake/openblas/, libopenblas.so.0, cblas.h, ...) are
#     update-alternatives links made by its postinst, which `dpkg -x` does not run: made here as
#     relative links into openblas-openmp/ (copies for .pc files), read from the packages' own
#     postinst scripts.
#   - Every other .pc file's prefix=/usr: relative to ${pcfiledir}.
#   - No link may point outside the prefix, and none may dangle (checked; the script fails if so).
# Left out: static archives that nothing links (OpenBLAS's, Boost.Program_options'), OpenBLAS's
# reference-BLAS/LAPACK names libblas.so.3 and liblapack.so.3 (dlscale links libopenblas.so; on
# LD_LIBRARY_PATH they would replace the GPU machine's own BLAS for every program, numpy included),
# and documentation. libgfortran5 and libquadmath0 go to prefix/fallback/lib, which gpu-check.sh
# puts on LD_LIBRARY_PATH only when the machine has no libgfortran.so.5 of its own.
set -euo pipefail

if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
elif (($#)); then
  echo "make-gpu-bundle: unknown argument $1 (see --help)" >&2
  exit 2
fi

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD/.gpu-bundle
debs=$root/debs
prefix=$root/prefix
archive=$root/gpu-deps.tar.xz
arch_triplet=x86_64-linux-gnu
size_limit_mib=60

# The packages, their runtime libraries, and what their CMake configs ask for. Not taken although
# listed as dependencies: catch2 (libspdlog-dev; only spdlog's own tests use it), libstdc++-12-dev
# (libboost1.74-dev; g++'s own is used), gcc-12-base (libgfortran5; only documentation), and the
# C/C++ runtime (libc6, libgcc-s1, libstdc++6, libgomp1), which Ubuntu 24.04 has in newer versions.
packages=(
  libdnnl-dev libdnnl2                                   # oneDNN 2.6 (OpenMP runtime)
  ocl-icd-libopencl1 ocl-icd-opencl-dev                  # libdnnl2 needs libOpenCL.so.1; its
  opencl-c-headers opencl-clhpp-headers                  #   CMake config finds OpenCL headers
  libopenblas-openmp-dev libopenblas0-openmp             # OpenBLAS 0.3.21, OpenMP build
  libgfortran5 libquadmath0                              # OpenBLAS's runtime (fallback only)
  libspdlog-dev libspdlog1.10                            # spdlog 1.10
  libfmt-dev libfmt9                                     # fmt 9.1
  libboost-program-options-dev libboost-program-options1.74-dev
  libboost-program-options1.74.0 libboost1.74-dev        # Boost 1.74 headers and CMake configs
  libgtest-dev libgmock-dev googletest                   # GoogleTest 1.12
)

for tool in apt-get apt-cache dpkg dpkg-deb tar xz; do
  command -v "$tool" >/dev/null || { echo "make-gpu-bundle: needs $tool (Debian 12)" >&2; exit 1; }
done
if [[ $(dpkg --print-architecture) != amd64 ]]; then
  echo "make-gpu-bundle: this makes an amd64 bundle and must run on amd64 Debian" >&2
  exit 1
fi

# --- 1. Download (or reuse) each package's candidate version ----------------------------------
mkdir -p "$debs"
apt_options=()
# apt's download sandbox user (_apt) cannot write to a root-owned folder; as root, skip it.
[[ $(id -u) -eq 0 ]] && apt_options+=(-o APT::Sandbox::User=root)
deb_files=()
for package in "${packages[@]}"; do
  fields=$(apt-cache show --no-all-versions "$package" 2>/dev/null) || {
    echo "make-gpu-bundle: apt knows no package $package (run apt-get update?)" >&2; exit 1; }
  version=$(sed -n 's/^Version: //p' <<<"$fields" | head -n1)
  deb_arch=$(sed -n 's/^Architecture: //p' <<<"$fields" | head -n1)
  file=${package}_${version//:/%3a}_${deb_arch}.deb
  if [[ ! -s $debs/$file && -s /var/cache/apt/archives/$file ]]; then
    cp /var/cache/apt/archives/"$file" "$debs/"
  fi
  if [[ ! -s $debs/$file ]]; then
    (cd "$debs" && apt-get "${apt_options[@]}" download -q "$package=$version")
  fi
  if [[ $(dpkg-deb -f "$debs/$file" Package Version | tr '\n' ' ') != "Package: $package Version: $version " ]]; then
    echo "make-gpu-bundle: $debs/$file is not $package $version" >&2
    exit 1
  fi
  deb_files+=("$debs/$file")
done

# --- 2. Unpack into a fresh prefix -------------------------------------------------------------
rm -rf "$prefix"
mkdir -p "$prefix"
for deb in "${deb_files[@]}"; do
  dpkg-deb -x "$deb" "$prefix"
done
libdir=$prefix/usr/lib/$arch_triplet
blasdir=$libdir/openblas-openmp

# --- 3. Leave out what nothing here uses -------------------------------------------------------
rm -rf "$prefix"/usr/share/doc "$prefix"/usr/share/man "$prefix"/usr/share/lintian \
       "$prefix"/usr/share/bug
rm -f "$blasdir"/*.a "$libdir"/libboost_program_options.a
rm -f "$blasdir"/libblas.so* "$blasdir"/liblapack.so* \
      "$blasdir"/pkgconfig/blas-openblas.pc "$blasdir"/pkgconfig/lapack-openblas.pc
mkdir -p "$prefix"/fallback/lib
mv "$libdir"/libgfortran.so.5* "$libdir"/libquadmath.so.0* "$prefix"/fallback/lib/

# --- 3b. The cuDNN frontend's headers (header-only; no package of Debian's) -------------------
scripts/fetch-cudnn-frontend.sh
mkdir -p "$prefix/cudnn-frontend"
cp -r .cudnn-frontend/include "$prefix/cudnn-frontend/include"
frontend_version=$(<.cudnn-frontend/include/.version)

# --- 4. The update-alternatives links, from the packages' postinst scripts ---------------------
# `update-alternatives --install LINK NAME PATH PRIORITY [--slave LINK NAME PATH]...`: each
# LINK -> PATH becomes a relative link inside the prefix when PATH is there (left-out files not).
for deb in "${deb_files[@]}"; do
  control=$(mktemp -d)
  dpkg-deb -e "$deb" "$control"
  if [[ -f $control/postinst ]]; then
    # Join continued lines, then print "LINK PATH" for the master and every slave.
    sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$control/postinst" |
      awk '$1 == "update-alternatives" && $2 == "--install" {
             print $3, $5
             for (i = 7; i <= NF; i++) if ($i == "--slave") { print $(i + 1), $(i + 3); i += 3 }
           }' |
      while read -r link path; do
        [[ -e $prefix$path ]] || continue
        mkdir -p "$(dirname "$prefix$link")"
        if [[ $link == *.pc ]]; then
          # pkg-config's ${pcfiledir} is the folder of the link, not of its target: copy (step 6
          # makes each copy's paths relative to where it lies).
          cp "$prefix$path" "$prefix$link"
        else
          ln -sfn "$(realpath -s --relative-to="$(dirname "$prefix$link")" "$prefix$path")" "$prefix$link"
        fi
      done
  fi
  rm -rf "$control"
done

# --- 5. OpenBLAS's CMake config: absolute /usr paths -> relative to the config's real location -
blas_config=$blasdir/cmake/openblas/OpenBLASConfig.cmake
blas_version=$(sed -n 's/^SET(OpenBLAS_VERSION "\(.*\)")$/\1/p' "$blas_config")
[[ -n $blas_version ]] || { echo "make-gpu-bundle: unexpected $blas_config" >&2; exit 1; }
cat >"$blas_config" <<EOF
# Debian's OpenBLASConfig.cmake (libopenblas-openmp-dev $blas_version) named /usr/include and
# /usr/lib; dlscale's scripts/make-gpu-bundle.sh made its paths relative, so that the bundle works
# wherever it is unpacked. REALPATH: lib/$arch_triplet/cmake/openblas/ holds a link to this file.
get_filename_component(_openblas_config "\${CMAKE_CURRENT_LIST_FILE}" REALPATH)
get_filename_component(_openblas_usr "\${_openblas_config}/../../../../../.." ABSOLUTE)
SET(OpenBLAS_VERSION "$blas_version")
SET(OpenBLAS_INCLUDE_DIRS \${_openblas_usr}/include/$arch_triplet/openblas-openmp/)
SET(OpenBLAS_LIBRARIES \${_openblas_usr}/lib/$arch_triplet/openblas-openmp/libopenblas.so)
unset(_openblas_config)
unset(_openblas_usr)
EOF

# --- 6. pkg-config files: /usr -> ${pcfiledir}/<relative> --------------------------------------
while IFS= read -r -d '' pc; do
  [[ -L $pc ]] && continue
  relative=$(realpath -s --relative-to="$(dirname "$pc")" "$prefix/usr")
  sed -i -E "/^[A-Za-z_.]+=|^(Libs|Libs.private|Cflags):/ s#(^|[=[:space:]]|-[IL])/usr(/|\$|[[:space:]])#\1\${pcfiledir}/$relative\2#g" "$pc"
done < <(find "$prefix" -name '*.pc' -print0)

# --- 7. Checks: nothing may point or refer outside the prefix ----------------------------------
status=0
while IFS= read -r -d '' link; do
  target=$(readlink "$link")
  if [[ $target == /* ]]; then
    echo "make-gpu-bundle: absolute link ${link#"$prefix"/} -> $target" >&2; status=1
  elif [[ ! -e $link ]]; then
    echo "make-gpu-bundle: dangling link ${link#"$prefix"/} -> $target" >&2; status=1
  fi
done < <(find "$prefix" -type l -print0)
# CMake configs may name /usr only in comments and in their "/usr move" checks, which apply only
# when the config's real folder is the one under /usr: get_filename_component(_realOrig ...) and
# the set(_IMPORT_PREFIX "/usr/...") it guards; Boost's test of its build folder likewise.
if grep -rnE '(^|[^[:alnum:]_/])/usr/(include|lib)' --include='*.cmake' "$prefix" |
   grep -vE ':[0-9]+:[[:space:]]*#|_realOrig|set\(_IMPORT_PREFIX "/usr/lib/[^"]*/cmake/[^"/]*"\)|_BOOST_CMAKEDIR_ORIGINAL|/build/boost' >&2; then
  echo "make-gpu-bundle: CMake files above still name /usr" >&2; status=1
fi
if grep -rlE '(^|[=[:space:]]|-[IL])/usr(/|$)' --include='*.pc' "$prefix" >&2; then
  echo "make-gpu-bundle: pkg-config files above still name /usr" >&2; status=1
fi
((status == 0)) || exit 1

# --- 8. Manifest and archive -------------------------------------------------------------------
{
  echo "# dlscale GPU bundle: Debian $(cat /etc/debian_version 2>/dev/null || echo '?') packages, amd64,"
  echo "# made $(date -u +%Y-%m-%dT%H:%M:%SZ) by scripts/make-gpu-bundle.sh"
  for deb in "${deb_files[@]}"; do dpkg-deb -f "$deb" Package Version | paste -sd' '; done |
    sed 's/^Package: \(.*\) Version: \(.*\)$/\1 \2/'
  echo "nvidia-cudnn-frontend $frontend_version (PyPI wheel, headers only: cudnn-frontend/include)"
} >"$prefix/BUNDLE-MANIFEST"

rm -f "$archive"
tar -C "$root" --owner=0 --group=0 --numeric-owner --sort=name -cf - prefix | xz -9 -T0 >"$archive.tmp"
mv "$archive.tmp" "$archive"
size=$(stat -c %s "$archive")
size_mib=$(awk -v s="$size" 'BEGIN { printf "%.1f", s / 1048576 }')
echo "make-gpu-bundle: $archive: $size_mib MiB (${#packages[@]} packages, $(du -sh "$prefix" | cut -f1) unpacked)"
if ((size >= size_limit_mib * 1048576)); then
  echo "make-gpu-bundle: the archive is over $size_limit_mib MiB" >&2
  exit 1
fi
