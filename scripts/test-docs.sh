#!/usr/bin/env bash
# The documentation, tested like code (part of scripts/test.sh, through scripts/test-python.sh,
# whose environment has the dcalign module):
#  1. Sphinx builds docs/ into build/docs/html with every warning an error (-W --keep-going)
#     and every cross-reference checked (-n: pages, labels, C++ and Python names; the role
#     {repo} checks repository paths). The C++ API comes from include/dcalign through Doxygen
#     and Breathe, the Python API from the installed module, the CLI reference from build/.
#  2. Every code block of README.md and docs/ runs (pytest + Sybil, docs/_ext/docs_examples.py):
#     commands, Python, C++ programs built against an installed dcalign. Blocks marked
#     `<!-- skip: next "reason" -->` are listed with their reason.
#  3. Headless Chromium opens the front page and a page of each kind (docs/_ext/check_site.py):
#     navigation, search box, images, console errors; screenshots go to
#     build/docs/screenshots (CI artefacts, not committed).
#
# Usage: scripts/test-docs.sh [--python PY] [--no-html] [--no-examples] [--no-browser] [PAGE...]
#   --python PY   an interpreter that imports dcalign, Sphinx, Breathe, MyST, Sybil, pytest and
#                 Selenium (scripts/test-python.sh passes its own). Without it a virtual
#                 environment is made in build/docs-work/venv (the system's packages, plus
#                 `pip install .` and Sybil and pytest from PyPI).
#   PAGE...       run the examples of these pages only (default: README.md and docs/).
# Environment: DCALIGN_BUILD_DIR (default build), DCALIGN_DOCS_WORK (default
# build/docs-work: the examples' working directories, Doxygen's XML, the installed prefix),
# DCALIGN_DOCS_OUT (default build/docs: html/ and screenshots/), DCALIGN_DATA (datasets; default
# ../shared/datasets).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py="" html=1 examples=1 browser=1 pages=()
while (($#)); do
  case $1 in
    --python) py=$2; shift 2 ;;
    --no-html) html=0; shift ;;
    --no-examples) examples=0; shift ;;
    --no-browser) browser=0; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "test-docs: unknown option $1" >&2; exit 2 ;;
    *) pages+=("$1"); shift ;;
  esac
done
export DCALIGN_BUILD_DIR=${DCALIGN_BUILD_DIR:-$root/build}
export DCALIGN_DOCS_WORK=${DCALIGN_DOCS_WORK:-$DCALIGN_BUILD_DIR/docs-work}
out=${DCALIGN_DOCS_OUT:-$DCALIGN_BUILD_DIR/docs}
mkdir -p "$DCALIGN_DOCS_WORK" "$out"
if [[ ! -x $DCALIGN_BUILD_DIR/src/cli/dcalign ]]; then
  echo "test-docs: $DCALIGN_BUILD_DIR/src/cli/dcalign not found: run scripts/build.sh first" >&2
  exit 1
fi
for tool in doxygen chromium chromedriver; do
  command -v "$tool" >/dev/null || {
    echo "test-docs: $tool not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
done

start=$SECONDS
if [[ -z $py ]]; then
  venv=$DCALIGN_DOCS_WORK/venv
  if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c 'import dcalign, sybil' 2>/dev/null; then
    echo "test-docs: making $venv (pip install . and Sybil from PyPI)"
    rm -rf "$venv"
    /usr/bin/python3 -m venv --system-site-packages "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      -r docs/requirements-pypi.txt pytest
    CMAKE_BUILD_PARALLEL_LEVEL=$(nproc 2>/dev/null || echo 2) "$venv/bin/python" -m pip install \
      --quiet --disable-pip-version-check "$root" \
      --config-settings=build-dir="$DCALIGN_DOCS_WORK/module-build"
  fi
  py=$venv/bin/python
fi
"$py" - <<'EOF' || { echo "test-docs: $py lacks a module above (scripts/install-deps.sh installs Sphinx, Breathe, MyST, Furo and Selenium; docs/requirements-pypi.txt names Sybil)" >&2; exit 1; }
import importlib, sys
missing = []
for name in ("dcalign", "sphinx", "breathe", "myst_parser", "furo", "sybil", "pytest", "selenium"):
    try:
        importlib.import_module(name)
    except Exception as e:
        missing.append(f"{name} ({e})")
if missing:
    print("test-docs: cannot import " + ", ".join(missing), file=sys.stderr)
    sys.exit(1)
EOF
status=0

if ((html)); then
  t=$SECONDS
  rm -rf "$out/html"
  echo "test-docs: sphinx-build -W --keep-going -n (into $out/html)"
  if ! "$py" -m sphinx -W --keep-going -n -q -b html -d "$DCALIGN_DOCS_WORK/doctrees" \
    docs "$out/html"; then
    echo "test-docs: FAILED: the site does not build without warnings" >&2
    status=1
  fi
  echo "test-docs: site built in $((SECONDS - t)) s"
fi

# README.md is outside the Sphinx site: its relative links are checked here (the site's own links
# are checked by Sphinx's -n above).
if ! "$py" - <<'EOF'
import re, sys
from pathlib import Path
text = Path("README.md").read_text()
bad = [t for t in re.findall(r"\]\(([^)\s]+)\)", text)
       if not re.match(r"[a-z]+:", t) and not Path(t.split("#")[0]).exists()]
for t in bad:
    print(f"test-docs: README.md links to {t}, which does not exist", file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
then
  status=1
fi

if ((examples)); then
  t=$SECONDS
  # The C++ examples find dcalign as a user does: an installed prefix on CMAKE_PREFIX_PATH.
  prefix=$DCALIGN_DOCS_WORK/prefix
  rm -rf "$prefix"
  cmake --install "$DCALIGN_BUILD_DIR" --prefix "$prefix" >/dev/null
  export CMAKE_PREFIX_PATH=$prefix${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  ((${#pages[@]})) || pages=(README.md docs)
  echo "test-docs: running the examples of ${pages[*]}"
  if ! PYTHONPATH=$root/docs/_ext${PYTHONPATH:+:$PYTHONPATH} "$py" -m pytest -p docs_examples \
    -p no:cacheprovider -q --rootdir="$root" "${pages[@]}"; then
    echo "test-docs: FAILED: an example of the documentation" >&2
    status=1
  fi
  echo "test-docs: examples ran in $((SECONDS - t)) s"
fi

if ((html && browser)) && [[ -f $out/html/index.html ]]; then
  t=$SECONDS
  if ! "$py" docs/_ext/check_site.py "$out/html" "$out/screenshots"; then
    echo "test-docs: FAILED: the built site in headless Chromium" >&2
    status=1
  fi
  echo "test-docs: browser check in $((SECONDS - t)) s"
fi
echo "test-docs: $( ((status)) && echo FAILED || echo passed ) in $((SECONDS - start)) s"
exit $status
