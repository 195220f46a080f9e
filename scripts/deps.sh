#!/usr/bin/env bash
# The one list of dcalign's Debian 12 dependencies, and what each provides to CMake.
# scripts/install-deps.sh installs every package of it; scripts/gpu-bundle.sh downloads the
# `lib` and `learn` groups (with their dependencies) for the GPU machine; scripts/gpu-check.sh
# turns off the optional dependencies marked `:off`; tests/deps/check_deps.py fails when a
# find_package / find_library / find_path that a default -DDCALIGN_WITH_LEARN=OFF configure
# reaches has no entry here, or an entry outside the bundle.
#
# Usage: scripts/deps.sh install|bundle|cmake-off|never-bundled|table
#   install        the packages install-deps.sh installs (every group but `machine`)
#   bundle         the packages gpu-bundle.sh starts from (groups lib and learn)
#   cmake-off      the configure arguments that turn the `:off` names off, one per line
#   never-bundled  the extended regular expression of packages any C++ compiler machine has
#   table          the table below without comments: PACKAGE GROUP [NAME...]
# Sourcing it defines the same as functions: deps_install, deps_bundle, ...
#
# Table: PACKAGE GROUP [NAME...]
#   GROUP  tool     compilers, build, test and benchmark tools: installed, never bundled (the
#                   GPU machine has its own compiler, CMake, Ninja and Python)
#          lib      libraries a default configure with DCALIGN_WITH_LEARN=OFF needs: installed
#                   and bundled
#          learn    libraries of the learning layer that are bundled for gpu-check.sh
#                   --with-learn (LibTorch comes from that machine's PyTorch)
#          host     installed, not bundled: the rest of the learning layer, and optional
#                   libraries that the GPU configure turns off
#          machine  not a package: what a machine with a C++ compiler and the CUDA toolkit has
#   NAME   what a find_package (its package name) or a find_library / find_path (its result
#          variable) in dcalign's CMake files finds in this package. NAME:off marks an optional
#          dependency the GPU configure turns off: CMAKE_DISABLE_FIND_PACKAGE_NAME=ON for a
#          package name, an empty NAME for a result variable (a name ending in _LIBRARY or
#          _INCLUDE_DIR; find_* skips a variable that is already set).
DEPS_TABLE='
build-essential       tool
cmake                 tool
ninja-build           tool
pkg-config            tool
clang-format          tool
# clang, libclang-rt-14-dev, libomp-dev: the libFuzzer targets; llvm: llvm-symbolizer
clang                 tool
libclang-rt-14-dev    tool
libomp-dev            tool
llvm                  tool
openmpi-bin           tool
python3               tool     Python3
python3-numpy         tool
python3-matplotlib    tool
# PyTorch (CPU): the torch tests of the Python module and examples/python/torch_training.py
python3-torch         tool
python3-dev           tool
python3-venv          tool
# the documentation (scripts/test-docs.sh): Sphinx, MyST, Breathe + Doxygen, headless Chromium
python3-sphinx        tool
python3-myst-parser   tool
python3-breathe       tool
doxygen               tool
chromium              tool
chromium-driver       tool
python3-selenium      tool
# MathJax 2 for the formulas of the documentation, copied into the site (docs/conf.py)
libjs-mathjax         tool
python3-pip           tool
@compiler             machine  Threads OpenMP
# NCCL is looked for only when MPI is found (off on the GPU machine)
@cuda-toolkit         machine  CUDAToolkit DCALIGN_NCCL_INCLUDE_DIR DCALIGN_NCCL_LIBRARY
# OpenBLAS (pthreads, the first alternative of libopenblas-dev) gives BLAS, CBLAS and LAPACK
libopenblas-dev       lib      BLAS LAPACK CBLAS_INCLUDE_DIR
# lapack.h, the C declarations of LAPACK, for the library; libLAPACKE itself only for bm_polar_paths
liblapacke-dev        lib      LAPACKE_INCLUDE_DIR DCALIGN_BENCH_LAPACKE_LIBRARY
nlohmann-json3-dev    lib      nlohmann_json
libcli11-dev          lib      CLI11
zlib1g-dev            lib      ZLIB
libssl-dev            lib      OpenSSL
liblbfgs-dev          lib      LBFGS_LIBRARY LBFGS_INCLUDE_DIR
# Boost.Math is header-only here: libboost-dev (the headers and BoostConfig) is enough
libboost-dev          lib      Boost
libgtest-dev          lib      GTest
# GTest::gmock, which tests/data links (the configure fails without its CMake targets)
libgmock-dev          lib
# the analyst service (src/service): gRPC (its package configuration brings Protobuf) and
# SQLite; off on the GPU machine for now
libgrpc++-dev         host     gRPC:off
libprotobuf-dev       host
protobuf-compiler     tool
# scripts/dev-cert.sh (a development certificate for the service, and its tests)
openssl               tool
protobuf-compiler-grpc tool
libsqlite3-dev        host     SQLite3:off
# the metrics endpoint of the service (src/service/metrics.cpp)
libcpp-httplib-dev    host     DCALIGN_HTTPLIB_INCLUDE_DIR:off DCALIGN_HTTPLIB_LIBRARY:off
# the DLPack header of the Python module (python/CMakeLists.txt; no default configure needs it)
libdlpack-dev         host     DLPACK_INCLUDE_DIR
# the Python client and its tests (python/dcalign_client)
python3-grpcio        tool
python3-protobuf      tool
# the text-format parser in the test of the metrics endpoint (python/dcalign_client/tests)
python3-prometheus-client tool
libsvm-dev            learn    LIBSVM_INCLUDE_DIR LIBSVM_LIBRARY
libtomlplusplus-dev   learn    tomlplusplus
# the reference LAPACK: not linked (OpenBLAS is), kept for what installs it here
liblapack-dev         host
libtorch-dev          host     Torch
libxgboost-dev        learn    XGBOOST_INCLUDE_DIR XGBOOST_LIBRARY
# the bm_* programs; gpu-check.sh builds none of them
libbenchmark-dev      host     benchmark:off
libopenmpi-dev        host     MPI:off
librdkit-dev          host     RDKIT_INCLUDE_DIR:off DCALIGN_RDKitSmilesParse_LIBRARY:off
librdkit-dev          host     DCALIGN_RDKitFingerprints_LIBRARY:off DCALIGN_RDKitGraphMol_LIBRARY:off
librdkit-dev          host     DCALIGN_RDKitDataStructs_LIBRARY:off DCALIGN_RDKitRDGeometryLib_LIBRARY:off
librdkit-dev          host     DCALIGN_RDKitRDGeneral_LIBRARY:off
'
# Never bundled: what any machine that compiles C++ has (the C library and its headers, the
# kernel headers, GCC with its runtime, development packages and sanitizer runtimes, which
# gcc-N's and libstdc++-N-dev's dependencies would otherwise pull in), and dpkg's own.
DEPS_NEVER_BUNDLED='^(libc6|libc6-dev|libc-dev|libc-dev-bin|libcrypt1|libcrypt-dev|linux-libc-dev|libstdc\+\+6|libgcc-s1|gcc-[0-9]+-base|gcc|g\+\+|cpp|gcc-[0-9]+|g\+\+-[0-9]+|cpp-[0-9]+|libstdc\+\+-[0-9]+-dev|libgcc-[0-9]+-dev|libgomp1|libitm1|libatomic1|libasan[0-9]+|liblsan[0-9]+|libtsan[0-9]+|libubsan[0-9]+|libhwasan[0-9]+|libcc1-0|debconf|dpkg|perl-base)$'

deps_table() { awk '!/^[[:space:]]*(#|$)/' <<<"$DEPS_TABLE"; }
deps_group() { deps_table | awk -v groups=" $* " 'index(groups, " " $2 " ") && !seen[$1]++ {print $1}'; }
deps_install() { deps_group tool lib learn host; }
deps_bundle() { deps_group lib learn; }
deps_never_bundled() { echo "$DEPS_NEVER_BUNDLED"; }
deps_cmake_off() {
  local name
  for name in $(deps_table | awk '{for (i = 3; i <= NF; i++) if ($i ~ /:off$/) print substr($i, 1, length($i) - 4)}'); do
    if [[ $name =~ _(LIBRARY|INCLUDE_DIR)$ ]]; then
      echo "-D$name="
    else
      echo "-DCMAKE_DISABLE_FIND_PACKAGE_$name=ON"
    fi
  done
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  case ${1:-} in
    install | bundle | table | never-bundled) "deps_${1//-/_}" ;;
    cmake-off) deps_cmake_off ;;
    *)
      echo "usage: scripts/deps.sh install|bundle|cmake-off|never-bundled|table" >&2
      exit 2
      ;;
  esac
fi
