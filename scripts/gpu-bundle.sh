#!/usr/bin/env bash
# Downloads (never installs) the Debian 12 packages that dcalign's build needs and that the lent
# GPU machine lacks, into .debs/ (git-ignored), for scripts/gpu-check.sh to unpack there with
# `dpkg -x` into a private prefix. Run it HERE, on a Debian 12 machine whose apt sources work;
# the GPU machine has no package registry and no network. Idempotent: a package whose .deb of
# the candidate version is already in .debs/ is not downloaded again, and .debs/ ends up holding
# exactly the resolved set (stale versions are removed).
#
# Usage: scripts/gpu-bundle.sh [--no-update]
#   --no-update   skip `apt-get update` (the package lists are fresh already)
#
# What is resolved: the packages below plus their Depends/Pre-Depends, recursively (first
# alternative that is not already chosen; virtual packages resolve to a provider already in the
# set), except what the GPU image surely has: the C library, the GCC runtime (libstdc++6,
# libgcc-s1, gcc-*-base) and the compilers. libgomp1 is not needed: the OpenBLAS variant used is
# the pthreads one, and OpenMP comes with the machine's compiler.
set -euo pipefail
cd "$(dirname "$0")/.."

update=1
for arg in "$@"; do
  case $arg in
    --no-update) update=0 ;;
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

ROOTS=(
  # OpenBLAS (pthreads) provides BLAS, CBLAS and LAPACK; LAPACKE is the C interface.
  libopenblas-dev libopenblas0 libopenblas0-pthread libopenblas-pthread-dev
  liblapack3 liblapack-dev liblapacke liblapacke-dev libtmglib3
  libgfortran5 libquadmath0
  # Tests, benchmarks, command line, JSON, TOML, NPY/IDX readers (zlib), SHA-256 (OpenSSL).
  libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian
  libcli11-dev nlohmann-json3-dev libtomlplusplus-dev libtomlplusplus3
  zlib1g-dev zlib1g libssl-dev libssl3
  # LIBSVM for the learning layer (gpu-check.sh --with-learn).
  libsvm-dev libsvm3
)
# Never downloaded: present on any machine that can compile C++.
SKIP_RE='^(libc6|libc6-dev|libc-dev|libc-dev-bin|libstdc\+\+6|libgcc-s1|gcc-[0-9]+-base|gcc|g\+\+|gcc-[0-9]+|g\+\+-[0-9]+|cpp|debconf|dpkg|perl-base|libcrypt1|libcrypt-dev|linux-libc-dev|libgomp1)$'

if [[ $update -eq 1 ]]; then
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
  echo "gpu-bundle: apt-get update"
  $SUDO apt-get update -q >/dev/null
fi

# Prints one line per dependency group of package $1: the alternatives separated by spaces;
# a virtual package is written as <name>=provider,provider,...
dep_groups() {
  apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
    --no-enhances "$1" | awk '
    function flush() { if (group != "") print group; group = "" }
    NR == 1 { next }
    /^ *\|?(Pre)?Depends: / {
      alt = ($0 ~ /^ *\|/)
      sub(/^ *\|?(Pre)?Depends: /, "")
      name = $0
      if (pending) { group = group " " name } else { flush(); group = name }
      pending = alt
      last = name
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

declare -A chosen=()
queue=()
for p in "${ROOTS[@]}"; do
  if ! apt-cache show "$p" >/dev/null 2>&1; then
    echo "gpu-bundle: package '$p' is unknown to apt (apt-cache show failed)" >&2
    exit 1
  fi
  chosen[$p]=1
  queue+=("$p")
done

declare -A real_cache=()
is_real() {
  if [[ -z ${real_cache[$1]:-} ]]; then
    if apt-cache show "$1" >/dev/null 2>&1; then real_cache[$1]=1; else real_cache[$1]=0; fi
  fi
  [[ ${real_cache[$1]} == 1 ]]
}

while ((${#queue[@]})); do
  p=${queue[0]}
  queue=("${queue[@]:1}")
  while read -r group; do
    [[ -z $group ]] && continue
    satisfied=0
    pick=""
    for alt in $group; do
      name=${alt%%=*}
      name=${name#<}
      name=${name%>}
      name=${name%%:*}  # strip :any
      if [[ $alt == *=* ]]; then
        IFS=, read -r -a provs <<<"${alt#*=}"
        for pr in "${provs[@]}"; do
          if [[ -n ${chosen[$pr]:-} || $pr =~ $SKIP_RE ]]; then satisfied=1; fi
        done
        [[ -z $pick && ${#provs[@]} -gt 0 ]] && pick=${provs[0]}
      else
        if [[ -n ${chosen[$name]:-} || $name =~ $SKIP_RE ]]; then satisfied=1; fi
        [[ -z $pick ]] && is_real "$name" && pick=$name
      fi
    done
    if [[ $satisfied -eq 0 ]]; then
      if [[ -z $pick ]]; then
        echo "gpu-bundle: cannot satisfy '$group' (needed by $p)" >&2
        exit 1
      fi
      echo "gpu-bundle: $p needs $pick"
      chosen[$pick]=1
      queue+=("$pick")
    fi
  done < <(dep_groups "$p")
done

mkdir -p .debs
APT_OPTS=()
# As root, apt would drop to the _apt user, who cannot write into the checkout: say so.
if [[ $(id -u) -eq 0 ]]; then APT_OPTS=(-o APT::Sandbox::User=root); fi
wanted=()
for p in $(printf '%s\n' "${!chosen[@]}" | sort); do
  ver=$(apt-cache policy "$p" | awk '/Candidate:/ {print $2}')
  arch=$(apt-cache show "$p=$ver" | awk '/^Architecture:/ {print $2; exit}')
  # dpkg-style file name: the epoch's colon is written %3a by apt-get download.
  file="${p}_${ver//:/%3a}_${arch}.deb"
  wanted+=("$file")
  if [[ -s .debs/$file ]] && dpkg-deb --info ".debs/$file" >/dev/null 2>&1; then
    echo "present     $file"
  else
    (cd .debs && apt-get download -q "${APT_OPTS[@]}" "$p=$ver" >/dev/null)
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

debs_bytes=$(du -cb .debs/*.deb | awk 'END {print $1}')
tracked_bytes=$(git ls-files -z 2>/dev/null | du -cb --files0-from=- 2>/dev/null | awk 'END {print $1}')
untracked_bytes=$(git ls-files -z --others --exclude-standard 2>/dev/null |
  du -cb --files0-from=- 2>/dev/null | awk 'END {print $1}')
total=$((debs_bytes + ${tracked_bytes:-0} + ${untracked_bytes:-0}))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
echo "gpu-bundle: ${#wanted[@]} packages in .debs/: $(mib "$debs_bytes")"
echo "gpu-bundle: working tree that travels: tracked $(mib "${tracked_bytes:-0}"), untracked" \
  "not ignored $(mib "${untracked_bytes:-0}"); with .debs: $(mib "$total") of 64 MiB"
if ((total > 60 * 1048576)); then
  echo "gpu-bundle: WARNING: over 60 MiB together; the device tool carries at most 64 MiB" >&2
  exit 1
fi
