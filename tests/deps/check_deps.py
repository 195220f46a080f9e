#!/usr/bin/env python3
"""Every dependency a default -DDCALIGN_WITH_LEARN=OFF configure looks for is in the GPU bundle.

  check_deps.py --source DIR --work DIR [--cmake CMAKE] [--generator G] [-D...]...

Configures the source tree in WORK with DCALIGN_WITH_LEARN=OFF under `cmake --trace-expand
--trace-format=json-v1`, collects every find_package, find_library and find_path that the
project's own CMake files executed, and checks each against scripts/deps.sh's table: the name
must be listed, and its package must be one that scripts/gpu-bundle.sh bundles (groups lib,
learn), or one the GPU machine has (groups tool, machine), or the name must be marked `:off`
(an optional dependency that scripts/gpu-check.sh turns off; never one called REQUIRED, and
spelled as deps.sh tells a package name from a result variable). Fails, naming each offender,
when any is not; the trace shows what the configure really reaches, so a dependency added to any
CMakeLists.txt is seen without this script knowing the files.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

FINDS = ("find_package", "find_library", "find_path")
VARIABLE_RE = re.compile(r"_(LIBRARY|INCLUDE_DIR)$")  # deps.sh's rule for :off switches


def deps(source, what):
    out = subprocess.run(["bash", os.path.join(source, "scripts", "deps.sh"), what], check=True,
                         capture_output=True, text=True).stdout
    return [line.split() for line in out.splitlines() if line.strip()]


def reached_finds(trace, source, work):
    """(command, name, required, where) of each find_* the project's CMake files executed."""
    found = []
    with open(trace) as f:
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            cmd = ev.get("cmd", "").lower()
            path = ev.get("file", "")
            if cmd not in FINDS or not path.startswith(source + os.sep):
                continue
            if path.startswith(work + os.sep):  # generated files of the traced build
                continue
            args = ev.get("args") or []
            if not args:
                continue
            where = f"{os.path.relpath(path, source)}:{ev.get('line')}"
            found.append((cmd, args[0], "REQUIRED" in args, where))
    return found


def check(finds, table, bundle, never_re):
    """Returns the error messages and one report line per reached name."""
    entries = {}  # name -> (package, group, off)
    for row in table:
        package, group, names = row[0], row[1], row[2:]
        for n in names:
            off = n.endswith(":off")
            entries[n[:-4] if off else n] = (package, group, off)
    errors, report, seen = [], [], set()
    for package in bundle:
        if re.match(never_re, package):
            errors.append(f"{package}: in the bundle groups but matches the never-bundled pattern")
    for cmd, name, required, where in finds:
        if (cmd, name) in seen:
            continue
        seen.add((cmd, name))
        entry = entries.get(name)
        if entry is None:
            errors.append(f"{where}: {cmd}({name}) has no entry in scripts/deps.sh: add the Debian "
                          "package that provides it (group lib, so that the GPU bundle has it), "
                          "or mark it NAME:off if it is optional")
            report.append(f"  {cmd:12} {name:36} MISSING")
            continue
        package, group, off = entry
        state = f"{package} ({group}{', off on the GPU machine' if off else ''})"
        if off:
            is_variable = cmd != "find_package"
            if required:
                errors.append(f"{where}: {cmd}({name}) is REQUIRED but marked :off in deps.sh")
            elif is_variable != bool(VARIABLE_RE.search(name)):
                errors.append(f"{where}: {cmd}({name}) is marked :off, but deps.sh would turn it "
                              "off as a " + ("package" if is_variable else "result variable"))
        elif group in ("tool", "machine"):
            pass
        elif package not in bundle:
            errors.append(f"{where}: {cmd}({name}) is needed with DCALIGN_WITH_LEARN=OFF, but "
                          f"its package {package} (group {group}) is not in the GPU bundle "
                          "(scripts/deps.sh bundle)")
            state += " NOT BUNDLED"
        report.append(f"  {cmd:12} {name:36} {state}")
    return errors, report


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--cmake", default="cmake")
    ap.add_argument("--generator", default="Ninja")
    ap.add_argument("-D", dest="defines", action="append", default=[],
                    help="an extra cache entry for the traced configure (e.g. the CUDA compiler)")
    args = ap.parse_args()
    source = os.path.realpath(args.source)
    work = os.path.realpath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    trace = os.path.join(work, "trace.json")
    cmd = [args.cmake, "-S", source, "-B", os.path.join(work, "build"), "-G", args.generator,
           "-DDCALIGN_WITH_LEARN=OFF", "--trace-expand", "--trace-format=json-v1",
           f"--trace-redirect={trace}"] + [f"-D{d}" for d in args.defines]
    print("traced configure:", " ".join(cmd), flush=True)
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        # Finds after the failing one were not reached: the check would be incomplete.
        print((run.stdout + run.stderr)[-4000:])
        print(f"FAILED: the traced configure exited {run.returncode}")
        return 1
    finds = reached_finds(trace, source, work)
    table = deps(source, "table")
    bundle = {row[0] for row in deps(source, "bundle")}
    never_re = deps(source, "never-bundled")[0][0]
    errors, report = check(finds, table, bundle, never_re)
    print(f"{len(report)} dependencies reached with DCALIGN_WITH_LEARN=OFF "
          f"({len(bundle)} packages in the bundle's roots):")
    print("\n".join(report))
    if not finds:
        errors.append("the trace holds no find_package/find_library/find_path of the project")
    if errors:
        print("\n".join(f"ERROR: {e}" for e in errors))
        print(f"FAILED: {len(errors)} problem(s)")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print("deps check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
