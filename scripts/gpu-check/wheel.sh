# shellcheck shell=bash
# gpu-check.sh, part 3 (sourced by scripts/gpu-check.sh, in its shell, with --wheel or
# --wheel-only): the Python wheel on this machine's PyTorch. Its log: wheel.log.
#
#  a. the carried wheel whose tag is the interpreter's (cpXY of `$WHEEL_PY`: --python, default
#     python3; in --wheel-dir, default .gpu-wheel, filled by scripts/gpu-bundle.sh --wheel PY);
#  b. a fresh virtual environment from that interpreter (--without-pip: Ubuntu's python3 may
#     lack ensurepip) in BUILD/wheel-venv. A venv made from a venv (the GPU machine's
#     /opt/torch/.venv) sees the BASE interpreter's site-packages, not the torch venv's, even with
#     --system-site-packages; so a .pth file adds the interpreter's own site directories (its
#     sys.path entries named site-packages/dist-packages, in order: PyTorch, NumPy) after the new
#     environment's, and a link `nvidia` beside the wheel points at that site's NVIDIA wheels
#     (where dcalign's CUDA backend looks for cuBLAS/cuSOLVER when the system has none, as if
#     dcalign were installed into the torch environment);
#  c. the wheel installed with `pip install --no-deps --no-index --target <site-packages>` where
#     the interpreter has pip, else unpacked (a wheel is a zip: python -m zipfile -e), together
#     with the carried pytest, iniconfig, pluggy, packaging (*-py3-none-any.whl) when the
#     environment cannot import pytest, and a carried numpy-*-cpXY-*.whl when it cannot import
#     NumPy;
#  d. wheel_smoke.py (beside this file; prefixed by $DCALIGN_WHEEL_SMOKE_WRAP when set, as
#     scripts/gpu-rehearse.sh does to hide the system's libraries): the import from the fresh
#     environment, every method, the wheel's own OpenBLAS; on a GPU ODC on it equal to the CPU's
#     and where cuBLAS/cuSOLVER came from;
#  e. `python -m pytest -m gpu python/tests` (-rs: the skip reasons): the gpu tests must be
#     collected; with a GPU none may skip;
#  f. examples/python/torch_training.py --device cuda (--wheel-cpu: --device cpu), its defaults
#     (about 2 s on a CPU); a pass is its "torch_training.py: ok".
# All within min(--wheel-seconds, default 120, what the budget leaves). Without a usable GPU the
# step is "incomplete: no usable GPU" at best (the CUDA example is no pass), except with
# --wheel-cpu (the rehearsal, no GPU expected), which passes when a to f pass.

# WHEEL_LOG (OUTDIR/wheel.log) and WHEEL_LINE (the summary's row) are set by gpu-check.sh.
run_wheel() {
  if skipped wheel; then
    record wheel skipped "--skip wheel"
    return
  fi
  local py=${WHEEL_PY:-$PYTHON} secs deadline
  if [[ -z $py ]]; then
    record wheel FAIL "no python3 (--python PY)"
    return
  fi
  secs=$(allot "$WHEEL_SECONDS" 15)
  if ((secs < 20)); then
    record wheel skipped "too little time left ($(remaining) s)"
    return
  fi
  deadline=$((SECONDS + secs))
  left() { local l=$((deadline - SECONDS)); ((l < 1)) && l=1; echo "$l"; }
  # The interpreter's own environment: its library path, not the prefix's (the wheel bundles
  # its libraries; PyTorch brings its own).
  local -a clean=(env -u PYTHONPATH LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" PATH="$ORIG_PATH")
  local tag ver
  if ! tag=$("${clean[@]}" "$py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])' 2>&1); then
    record wheel FAIL "$py does not run: $tag"
    return
  fi
  ver=$("${clean[@]}" "$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  local wheel
  wheel=$(find "$WHEEL_DIR" -maxdepth 1 -name "dcalign-*-$tag-$tag-*.whl" 2>/dev/null | sort | tail -1)
  {
    echo "=== the wheel step: $py (Python $ver, $tag), wheels from $WHEEL_DIR, $secs s at most"
    ls -l "$WHEEL_DIR" 2>&1
  } >"$WHEEL_LOG"
  if [[ -z $wheel ]]; then
    WHEEL_LINE="no wheel for $tag"
    record wheel FAIL "no wheel for $tag in ${WHEEL_DIR#"$ROOT"/}: build one with scripts/gpu-bundle.sh --wheel PY (PY: a CPython $ver with pip)"
    return
  fi
  local venv=$BUILD/wheel-venv site vpy
  rm -rf "$venv"
  cmd_note "$py -m venv --without-pip $venv   # + a .pth adding $py's site directories"
  if ! "${clean[@]}" "$py" -m venv --without-pip "$venv" >>"$WHEEL_LOG" 2>&1; then
    record wheel FAIL "$py -m venv --without-pip failed (wheel.log)"
    return
  fi
  vpy=$venv/bin/python
  site=$("${clean[@]}" "$vpy" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  # The interpreter's site directories, after the new environment's own.
  local dirs
  dirs=$("${clean[@]}" "$py" - "$site/dcalign-gpu-check-outer.pth" <<'EOF'
import os, sys
dirs = [p for p in sys.path
        if os.path.basename(p) in ("site-packages", "dist-packages") and os.path.isdir(p)]
with open(sys.argv[1], "w") as f:
    f.write("import site; list(map(site.addsitedir, %r))\n" % dirs)
print("\n".join(dirs))
EOF
  )
  local d nvidia=""
  while IFS= read -r d; do
    if [[ -n $d && -d $d/nvidia && ! -e $site/nvidia ]]; then
      ln -s "$d/nvidia" "$site/nvidia" && nvidia=$d/nvidia
    fi
  done <<<"$dirs"
  {
    echo "=== the environment $venv sees, after its own, the site directories of $py:"
    echo "${dirs:-(none)}" | sed 's/^/  /'
    echo "=== NVIDIA's wheels linked beside the wheel: ${nvidia:-none found}"
  } >>"$WHEEL_LOG"
  local torch_line
  torch_line=$("${clean[@]}" "$vpy" -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda, "GPU" if torch.cuda.is_available() else "no GPU")' 2>&1 | tail -1)
  echo "=== torch in the environment: $torch_line" >>"$WHEEL_LOG"

  # c. Install.
  local wheels=("$wheel") extra
  if ! "${clean[@]}" "$vpy" -c 'import pytest' 2>/dev/null; then
    mapfile -t extra < <(find "$WHEEL_DIR" -maxdepth 1 -name '*-py3-none-any.whl' | sort)
    wheels+=("${extra[@]}")
    echo "=== pytest is not importable: installing the carried ${extra[*]:-(none)}" >>"$WHEEL_LOG"
  fi
  if ! "${clean[@]}" "$vpy" -c 'import numpy' 2>/dev/null; then
    mapfile -t extra < <(find "$WHEEL_DIR" -maxdepth 1 -name "numpy-*-$tag-*.whl" | sort | tail -1)
    wheels+=("${extra[@]}")
    echo "=== NumPy is not importable: installing the carried ${extra[*]:-(none)}" >>"$WHEEL_LOG"
  fi
  local route rc
  if "${clean[@]}" "$py" -m pip --version >/dev/null 2>&1; then
    route="pip install --no-deps --target"
    cmd_note "$py -m pip install --no-deps --no-index --target $site ${wheels[*]}"
    "${clean[@]}" timeout "$(left)" "$py" -m pip install --no-deps --no-index --no-compile \
      --disable-pip-version-check --target "$site" "${wheels[@]}" >>"$WHEEL_LOG" 2>&1
    rc=$?
  else
    route="unpacked (no pip)"
    rc=0
    local w
    for w in "${wheels[@]}"; do
      cmd_note "$py -m zipfile -e $w $site"
      "${clean[@]}" "$py" -m zipfile -e "$w" "$site" >>"$WHEEL_LOG" 2>&1 || rc=1
    done
  fi
  echo "=== install ($route): exit $rc" >>"$WHEEL_LOG"
  local notes
  notes="$(basename "$wheel") ($(($(stat -c %s "$wheel") / 1048576)) MiB), $route; $torch_line"
  if ((rc != 0)); then
    WHEEL_LINE="the install failed"
    record wheel FAIL "$notes; the install failed (wheel.log)"
    return
  fi

  # d. The smoke check, e. the gpu tests, f. the example.
  local failed="" smoke_args=(--site "$site")
  [[ $GPU_OK -eq 1 ]] && smoke_args+=(--cuda)
  local -a wrap=()
  # shellcheck disable=SC2206
  [[ -n ${DCALIGN_WHEEL_SMOKE_WRAP:-} ]] && wrap=($DCALIGN_WHEEL_SMOKE_WRAP)
  cmd_note "${wrap[*]} $vpy scripts/gpu-check/wheel_smoke.py ${smoke_args[*]}"
  echo "=== ${wrap[*]} $vpy scripts/gpu-check/wheel_smoke.py ${smoke_args[*]}" >>"$WHEEL_LOG"
  (cd "$venv" && "${clean[@]}" timeout -k 5 "$(left)" "${wrap[@]}" "$vpy" \
    "$ROOT/scripts/gpu-check/wheel_smoke.py" "${smoke_args[@]}") >>"$WHEEL_LOG" 2>&1
  rc=$?
  ((rc == 0)) || failed+=" smoke(exit $rc)"
  notes+="; wheel_smoke.py: $([[ $rc -eq 0 ]] && echo ok || echo "exit $rc")"

  local pyt p=0 s=0 f=0
  if "${clean[@]}" "$vpy" -c 'import pytest' 2>/dev/null; then
    cmd_note "(cd $venv && $vpy -m pytest -m gpu -p no:cacheprovider -rs -v $ROOT/python/tests)"
    echo "=== $vpy -m pytest -m gpu -p no:cacheprovider -rs -v $ROOT/python/tests" >>"$WHEEL_LOG"
    pyt=$(cd "$venv" && "${clean[@]}" timeout -k 5 "$(left)" "$vpy" -m pytest -m gpu \
      -p no:cacheprovider -rs -v "$ROOT/python/tests" 2>&1)
    rc=$?
    echo "$pyt" >>"$WHEEL_LOG"
    p=$(grep -cE '::[^ ]+ PASSED' <<<"$pyt")
    s=$(grep -cE '::[^ ]+ SKIPPED' <<<"$pyt")
    f=$(grep -cE '::[^ ]+ (FAILED|ERROR)' <<<"$pyt")
    WHEEL_LINE="pytest -m gpu: $p passed, $f failed, $s skipped"
    notes+="; $WHEEL_LINE"
    if ((p + s + f == 0)); then
      failed+=" pytest(no gpu test collected, exit $rc)"
    elif ((rc != 0 || f > 0)); then
      failed+=" pytest(exit $rc)"
    elif [[ $GPU_OK -eq 1 ]] && ((s > 0)); then
      failed+=" pytest($s gpu tests skipped although a GPU is there)"
    fi
  else
    WHEEL_LINE="pytest missing"
    notes+="; pytest is not importable and no pytest wheel was carried (scripts/gpu-bundle.sh --wheel carries it): the gpu tests did not run"
    failed+=" pytest(missing)"
  fi

  local dev=cuda out
  [[ $WHEEL_CPU -eq 1 ]] && dev=cpu
  cmd_note "$vpy examples/python/torch_training.py --device $dev"
  echo "=== $vpy examples/python/torch_training.py --device $dev" >>"$WHEEL_LOG"
  out=$(cd "$venv" && "${clean[@]}" timeout -k 5 "$(left)" "$vpy" \
    "$ROOT/examples/python/torch_training.py" --device "$dev" 2>&1)
  rc=$?
  echo "$out" >>"$WHEEL_LOG"
  echo "=== torch_training.py --device $dev: exit $rc" >>"$WHEEL_LOG"
  if grep -q '^torch_training.py: ok$' <<<"$out" && ((rc == 0)); then
    notes+="; torch_training.py --device $dev: ok"
  else
    notes+="; torch_training.py --device $dev: not a pass (exit $rc: $(tail -1 <<<"$out" | cut -c1-200))"
    [[ $dev == cuda && $GPU_OK -ne 1 ]] || failed+=" torch_training($dev)"
  fi
  [[ $WHEEL_CPU -eq 1 ]] && notes+="; rehearsal (--wheel-cpu): the CUDA run needs a GPU"
  if [[ -n $failed ]]; then
    record wheel FAIL "$notes; failed:$failed (wheel.log)"
  elif [[ $GPU_OK -ne 1 && $WHEEL_CPU -ne 1 ]]; then
    record wheel incomplete "no usable GPU: $GPU_REASON; $notes"
  else
    record wheel ok "$notes"
  fi
}
