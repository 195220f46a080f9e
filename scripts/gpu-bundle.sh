#!/usr/bin/env bash
# Downloads (never installs) the Debian 12 packages that dcalign's build needs and that the lent
# GPU machine lacks, into .debs/ (git-ignored), for scripts/gpu-check.sh to unpack there with
# `dpkg -x` into a private prefix. Run it HERE, on a Debian 12 machine whose apt sources work;
# the GPU machine has no package registry and no network. Idempotent: a package whose .deb of
# the candidate version is already in .debs/ is not downloaded again, and .debs/ ends up holding
# exactly the resolved set (stale versions are removed).
#
# Usage: scripts/gpu-bundle.sh [--no-update] [--wheel PY [--wheel-numpy]]
#   --no-update   skip `apt-get update` (the package lists are fresh already)
#   --wheel PY    also the Python wheel for the GPU machine's interpreter, for gpu-check.sh
#                 --wheel: scripts/build-wheel.sh --python PY (PY: a CPython of the GPU
#                 machine's version, 3.12 there, with pip; here e.g.
#                 /root/.pyenv/versions/3.12.1/bin/python3.12) builds dcalign-*-cpXY-*.whl
#                 (about 13 MiB), copied into .gpu-wheel/ with pytest and its pure-Python
#                 dependencies (iniconfig, pluggy, packaging, ...; PY -m pip download from PyPI,
#                 about 1 MiB), which the GPU machine's PyTorch environment may lack. Older
#                 dcalign wheels of that tag and the pytest wheels are replaced.
#   --wheel-numpy also a NumPy wheel for PY (about 16 MiB; only for a GPU machine whose python3
#                 has no NumPy: gpu-check.sh installs it only then)
# At the end: the sizes of .debs (packages, wheels) and of the working tree that travels with
# it, against the device tool's 64 MiB (exit 1 above 60 MiB together). When packages, wheels and
# tree together exceed it (they do: about 30 + 15 + 26 MiB), it says to carry them in separate
# calls (.debs for the build check, only .gpu-wheel for gpu-check.sh --wheel-only) and fails
# only when one of those is over 60 MiB.
#
# What is resolved: the library packages of scripts/deps.sh (groups lib and learn: the same
# list install-deps.sh installs, less the tools, compilers and host-only libraries) plus their
# Depends/Pre-Depends, recursively (the first alternative, unless another alternative is
# already chosen or is OpenBLAS's pthreads variant; a virtual package resolves to a provider),
# except what any machine that compiles C++ has (scripts/deps.sh never-bundled: the C library,
# GCC with its runtime, development packages and sanitizer runtimes). libgomp1 is not needed:
# the OpenBLAS variant used is the pthreads one, and OpenMP comes with the machine's compiler.
set -euo pipefail
cd "$(dirname "$0")/.."

update=1
wheel_py=""
wheel_numpy=0
while (($#)); do
  arg=$1
  shift
  case $arg in
    --no-update) update=0 ;;
    --wheel) wheel_py=${1:?--wheel needs an interpreter (the GPU machine Python version)}; shift ;;
    --wheel-numpy) wheel_numpy=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "gpu-bundle: unknown argument '$arg'" >&2
      exit 2
      ;;
  esac
done

# shellcheck source=scripts/deps.sh
source scripts/deps.sh
mapfile -t ROOTS < <(deps_bundle)
SKIP_RE=$(deps_never_bundled)
# Alternatives taken whenever offered, so that the resolution does not depend on the order in
# which packages are visited: OpenBLAS's pthreads variant provides libblas.so.3,
# liblapack.so.3, libblas.so and liblapack.so (gpu-check.sh links them as update-alternatives
# would), so neither the reference BLAS/LAPACK nor another OpenBLAS variant is bundled.
PREFER_RE='^(libopenblas0-pthread|libopenblas-pthread-dev)$'

if [[ $update -eq 1 ]]; then
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
  echo "gpu-bundle: apt-get update"
  $SUDO apt-get update -q >/dev/null
fi

# A private binary cache of the package lists: images that disable APT's (Dir::Cache::pkgcache
# "", as Debian's docker images do) rebuild it in every apt-cache call, 0.6 s each.
APT_CACHE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/dcalign-apt-cache.XXXXXX")
trap 'rm -rf "$APT_CACHE_DIR"' EXIT
CACHE_OPTS=(-o "Dir::Cache::pkgcache=$APT_CACHE_DIR/pkgcache.bin"
  -o "Dir::Cache::srcpkgcache=$APT_CACHE_DIR/srcpkgcache.bin")
apt_cache() { apt-cache "${CACHE_OPTS[@]}" "$@"; }

# Prints one line per dependency group of each package named: the package, then the
# alternatives separated by spaces; a virtual package is written as <name>=provider,provider,...
# One apt-cache call for all (each call takes about 0.5 s).
dep_groups() {
  apt_cache depends --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
    --no-enhances "$@" | awk '
    function flush() { if (group != "") print pkg, group; group = "" }
    /^[^ ]/ { flush(); pkg = $0; pending = 0; next }   # the package whose dependencies follow
    /^ *\|?(Pre)?Depends: / {
      alt = ($0 ~ /^ *\|/)
      sub(/^ *\|?(Pre)?Depends: /, "")
      name = $0
      if (pending) { group = group " " name } else { flush(); group = name }
      pending = alt
      next
    }
    /^    [^ ]/ {   # providers of the virtual package just named
      sub(/^ +/, "")
      if (group ~ />$/ || group ~ /=[^ ]*$/) {
        if (group ~ />$/) group = group "=" $0; else group = group "," $0
      }
      next
    }
    { }
    END { flush() }'
}

# Every package apt has a version of (virtual packages are not listed).
declare -A real=()
while read -r p; do real[$p]=1; done < <(apt_cache pkgnames)

declare -A chosen=()
frontier=()
for p in "${ROOTS[@]}"; do
  if [[ $p =~ $SKIP_RE ]]; then
    echo "gpu-bundle: '$p' is in scripts/deps.sh's lib/learn groups and also never bundled" >&2
    exit 1
  fi
  if [[ -z ${real[$p]:-} ]]; then
    echo "gpu-bundle: package '$p' is unknown to apt" >&2
    exit 1
  fi
  chosen[$p]=1
  frontier+=("$p")
done

# Breadth first, one level of the dependency tree at a time.
while ((${#frontier[@]})); do
  next=()
  while read -r p group; do
    [[ -z $group ]] && continue
    satisfied=0
    pick=""
    preferred=""
    for alt in $group; do
      name=${alt%%=*}
      name=${name#<}
      name=${name%>}
      name=${name%%:*}  # strip :any
      if [[ $alt == *=* ]]; then
        IFS=, read -r -a provs <<<"${alt#*=}"
        for pr in "${provs[@]}"; do
          if [[ -n ${chosen[$pr]:-} || $pr =~ $SKIP_RE ]]; then satisfied=1; fi
          [[ -z $preferred && $pr =~ $PREFER_RE ]] && preferred=$pr
        done
        [[ -z $pick && ${#provs[@]} -gt 0 ]] && pick=${provs[0]}
      else
        if [[ -n ${chosen[$name]:-} || $name =~ $SKIP_RE ]]; then satisfied=1; fi
        [[ -z $preferred && $name =~ $PREFER_RE ]] && preferred=$name
        [[ -z $pick && -n ${real[$name]:-} ]] && pick=$name
      fi
    done
    [[ -n $preferred ]] && pick=$preferred
    if [[ $satisfied -eq 0 ]]; then
      if [[ -z $pick ]]; then
        echo "gpu-bundle: cannot satisfy '$group' (needed by $p)" >&2
        exit 1
      fi
      echo "gpu-bundle: $p needs $pick"
      chosen[$pick]=1
      next+=("$pick")
    fi
  done < <(dep_groups "${frontier[@]}")
  frontier=("${next[@]}")
done

mkdir -p .debs
APT_OPTS=()
# As root, apt would drop to the _apt user, who cannot write into the checkout: say so.
if [[ $(id -u) -eq 0 ]]; then APT_OPTS=(-o APT::Sandbox::User=root); fi
wanted=()
# The candidate version and architecture of every chosen package, in one call.
declare -A cand_ver=() cand_arch=()
while read -r p ver arch; do
  cand_ver[$p]=$ver
  cand_arch[$p]=$arch
done < <(apt_cache show --no-all-versions "${!chosen[@]}" | awk '
  /^Package:/ {p = $2} /^Version:/ {v = $2} /^Architecture:/ {a = $2}
  /^$/ {if (p != "") print p, v, a; p = ""}
  END {if (p != "") print p, v, a}')
for p in $(printf '%s\n' "${!chosen[@]}" | sort); do
  ver=${cand_ver[$p]:-} arch=${cand_arch[$p]:-}
  if [[ -z $ver || -z $arch ]]; then
    echo "gpu-bundle: apt-cache has no candidate version of $p" >&2
    exit 1
  fi
  # dpkg-style file name: the epoch's colon is written %3a by apt-get download.
  file="${p}_${ver//:/%3a}_${arch}.deb"
  wanted+=("$file")
  if [[ -s .debs/$file ]] && dpkg-deb --info ".debs/$file" >/dev/null 2>&1; then
    echo "present     $file"
  else
    (cd .debs && apt-get download -q "${CACHE_OPTS[@]}" "${APT_OPTS[@]}" "$p=$ver" >/dev/null)
    [[ -s .debs/$file ]] || {
      echo "gpu-bundle: apt-get download $p=$ver did not produce .debs/$file" >&2
      exit 1
    }
    echo "downloaded  $file"
  fi
done

# Remove anything else (older versions, packages no longer wanted).
for f in .debs/*.deb; do
  base=${f#.debs/}
  keep=0
  for w in "${wanted[@]}"; do [[ $w == "$base" ]] && keep=1; done
  if [[ $keep -eq 0 ]]; then
    echo "removing    $base (not in the resolved set)"
    rm -f "$f"
  fi
done
printf '%s\n' "${wanted[@]}" >.debs/MANIFEST

# The wheel for the GPU machine's Python (gpu-check.sh --wheel), with pytest.
if [[ -n $wheel_py ]]; then
  tag=$("$wheel_py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
  bash scripts/build-wheel.sh --python "$wheel_py"
  mkdir -p .gpu-wheel
  rm -f .gpu-wheel/dcalign-*-"$tag"-*.whl .gpu-wheel/*-py3-none-any.whl
  cp "${DCALIGN_WHEEL_DIR:-build/wheel}/$tag/dist/"dcalign-*-"$tag"-*.whl .gpu-wheel/
  "$wheel_py" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
    -d .gpu-wheel 'pytest>=8,<9'
  if [[ $wheel_numpy -eq 1 ]]; then
    rm -f .gpu-wheel/numpy-*-"$tag"-*.whl
    "$wheel_py" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
      --no-deps -d .gpu-wheel numpy
  fi
  echo "gpu-bundle: .gpu-wheel/ for $tag:"
  ls -l .gpu-wheel | sed 's/^/  /'
fi

# .gpu-wheel/ exists only after --wheel (du would fail on it, and set -e end the script).
wheel_bytes=0
[[ -d .gpu-wheel ]] && wheel_bytes=$(du -cb .gpu-wheel | awk 'END {print $1}')
debs_bytes=$(($(du -cb .debs | awk 'END {print $1}') + wheel_bytes))
tracked_bytes=$(git ls-files -z 2>/dev/null | du -cb --files0-from=- 2>/dev/null | awk 'END {print $1}')
untracked_bytes=$(git ls-files -z --others --exclude-standard 2>/dev/null |
  du -cb --files0-from=- 2>/dev/null | awk 'END {print $1}')
total=$((debs_bytes + ${tracked_bytes:-0} + ${untracked_bytes:-0}))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
echo "gpu-bundle: .debs/ and .gpu-wheel/ in all: $(mib "$debs_bytes") (${#wanted[@]} packages; .gpu-wheel/:" \
  "$(mib "$wheel_bytes"))"
echo "gpu-bundle: working tree that travels: tracked $(mib "${tracked_bytes:-0}"), untracked" \
  "not ignored $(mib "${untracked_bytes:-0}"); with .debs: $(mib "$total") of 64 MiB"
tree=$((${tracked_bytes:-0} + ${untracked_bytes:-0}))
if ((wheel_bytes > 0 && total > 60 * 1048576)); then
  # Too much for one call: the build check carries the packages, gpu-check.sh --wheel-only the
  # wheels (carry=[".gpu-wheel"]), each with the working tree.
  echo "gpu-bundle: over 60 MiB together: carry .debs for the build check (with the tree:" \
    "$(mib $((tree + debs_bytes - wheel_bytes)))) and .gpu-wheel for gpu-check.sh --wheel-only" \
    "($(mib $((tree + wheel_bytes)))), in separate calls"
  total=$((tree + (debs_bytes - wheel_bytes > wheel_bytes ? debs_bytes - wheel_bytes : wheel_bytes)))
fi
if ((total > 60 * 1048576)); then
  echo "gpu-bundle: WARNING: over 60 MiB together; the device tool carries at most 64 MiB" >&2
  exit 1
fi
