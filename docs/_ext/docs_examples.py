"""Runs every code block of README.md and docs/ (a pytest plugin on Sybil).

scripts/test-docs.sh runs `pytest -p docs_examples README.md docs`. Each page's blocks run in
order, in a working directory of their own ($DCALIGN_DOCS_WORK/examples/<page>, emptied first
and kept afterwards for inspection), with the build's executables first on PATH, the
interpreter that runs pytest (the one with the dcalign module) as `python3`, and the
repository's scripts/, experiments/, examples/, bench/, deploy/, proto/ and include/ linked in,
so that a command written as a reader runs it from the checkout works as written:

- ```python: executed in one namespace per page; a block that starts with `>>>` is a doctest
  whose output is compared (ELLIPSIS and NORMALIZE_WHITESPACE).
- ```console: `$ ` lines are commands (a trailing backslash continues one), the lines after one
  its expected output, compared as a doctest compares (`...` matches anything; whitespace runs
  are equal). Each command must exit 0, unless its output ends with `[exit status N]`, which
  it must then exit with. A command without output lines has only its status checked.
- ```sh / ```bash: run by `bash -euo pipefail` as one script; it must exit 0.
- A block whose first line is `# file: NAME` or `// file: NAME` (any language), or that follows
  `<!-- file: NAME -->`, is written to NAME in the working directory instead of being run.
- Blocks of other languages (text, json, toml, cmake, cpp, ...) that are none of the above are
  displays: cpp and cmake blocks are refused unless written to a file (a C++ example must
  compile), the rest are not run.
- `<!-- skip: next "reason" -->` before a block skips it; pytest's -rs lists every skipped block
  with its reason.

Background processes a block starts must redirect their output (or the block waits for them);
they are killed with their process group when the page ends. Every command has a time limit
(DCALIGN_DOCS_TIMEOUT, 300 s).
"""
import doctest
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from sybil import Document, Region, Sybil
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer, FencedCodeBlockLexer

REPO = Path(__file__).resolve().parents[2]
WORK = Path(os.environ.get("DCALIGN_DOCS_WORK", REPO / "build" / "docs-work")) / "examples"
TIMEOUT = float(os.environ.get("DCALIGN_DOCS_TIMEOUT", "300"))
FILE_MARK = re.compile(r"^\s*(?:#|//)\s*file:\s*(\S+)\s*$")
EXIT_MARK = re.compile(r"^\[exit status (\d+)\]$")
MUST_BE_FILES = {"cpp", "c++", "cmake"}
LINKED = ("scripts", "experiments", "examples", "bench", "deploy", "proto", "include")
CHECKER = doctest.OutputChecker()
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


class Page(Document):
    """A Markdown page whose namespace knows its path (for its working directory)."""

    def __init__(self, text, path):
        super().__init__(text, path)
        self.namespace["__page__"] = path


def _environment():
    env = dict(os.environ)
    build = Path(os.environ.get("DCALIGN_BUILD_DIR", REPO / "build"))
    env["PATH"] = os.pathsep.join(
        [str(build / "src" / "cli"), str(Path(sys.executable).parent), env.get("PATH", "")]
    )
    env["DCALIGN_REPO"] = str(REPO)
    env.setdefault("DCALIGN_DATA", str(REPO.parent / "shared" / "datasets"))
    env["PYTHON"] = sys.executable
    if os.geteuid() == 0:  # Open MPI refuses root without these (the MPI how-to runs mpirun)
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    env.pop("COLUMNS", None)
    return env


ENV = _environment()


def _page_dir(path):
    rel = Path(path).resolve().relative_to(REPO)
    return WORK / str(rel.with_suffix("")).replace(os.sep, "__")


def setup(namespace):
    work = _page_dir(namespace["__page__"])
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    # The pages' commands are written as a reader runs them, from the repository root
    # (`experiments/default.toml`, `scripts/dev-cert.sh`): those folders are linked in, read
    # only by convention, while everything a page writes stays in its own directory. build/ is
    # not linked (a page's own `cmake -B build` must not reach the real build tree).
    for name in LINKED:
        os.symlink(REPO / name, work / name)
    namespace["__cwd_before__"] = os.getcwd()
    namespace["__groups__"] = []
    os.chdir(work)


def teardown(namespace):
    for pgid in namespace.get("__groups__", []):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    os.chdir(namespace.get("__cwd_before__", REPO))


def _run(namespace, argv, what):
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env=ENV,
        start_new_session=True,
    )
    namespace["__groups__"].append(proc.pid)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"{what} did not end within {TIMEOUT:.0f} s; output:\n{out}")
    return proc.returncode, out


def _console_commands(source):
    """[(command, expected output)] of a console block."""
    items, command, expected, continuing = [], None, [], False
    for line in source.splitlines():
        if continuing:
            command += "\n" + line
            continuing = line.endswith("\\")
        elif line.startswith("$ "):
            if command is not None:
                items.append((command, "\n".join(expected)))
            command, expected = line[2:], []
            continuing = line.endswith("\\")
        elif command is None:
            if line.strip():
                raise ValueError(f"console block: output before the first command: {line!r}")
        else:
            expected.append(line)
    if command is not None:
        items.append((command, "\n".join(expected)))
    return items


def evaluate_console(example):
    for command, expected in _console_commands(example.parsed):
        lines = expected.rstrip().splitlines()
        want_status = 0
        mark = EXIT_MARK.match(lines[-1].strip()) if lines else None
        if mark:
            want_status = int(mark.group(1))
            lines = lines[:-1]
        status, out = _run(example.namespace, ["bash", "-o", "pipefail", "-c", command],
                           f"`{command}`")
        if status != want_status:
            raise AssertionError(
                f"`{command}` exited with {status}, expected {want_status}; output:\n{out}"
            )
        want = "\n".join(lines).strip()
        if want and not CHECKER.check_output(want + "\n", out.strip() + "\n", FLAGS):
            raise AssertionError(
                f"`{command}`: the output differs from the page's.\n--- expected\n{want}\n"
                f"--- got\n{out.rstrip()}"
            )


def evaluate_script(example):
    status, out = _run(example.namespace, ["bash", "-euo", "pipefail", "-c", example.parsed],
                       "the shell block")
    if status != 0:
        raise AssertionError(f"the shell block exited with {status}; output:\n{out}")


def _writer(name):
    def write(example):
        Path(name).parent.mkdir(parents=True, exist_ok=True)
        Path(name).write_text(example.parsed)

    return write


def _refuse(language):
    def refuse(example):
        raise AssertionError(
            f"a ```{language} block is neither written to a file (`// file: NAME` or "
            f"`# file: NAME` as its first line) nor skipped (<!-- skip: next \"reason\" -->); "
            "a C++ or CMake example must be built"
        )

    return refuse


class BlockParser:
    """Every fenced block but the plain Python ones (PythonBlocks below)."""

    def __init__(self):
        self.fences = FencedCodeBlockLexer(
            language=r"[^\n]*", mapping={"language": "language", "source": "source"}
        )
        self.file_comments = DirectiveInHTMLCommentLexer(directive="file", arguments=r"\S+")

    def __call__(self, document):
        named = {}
        for region in self.file_comments(document):
            named[region.end] = region.lexemes["arguments"].strip()
        for region in self.fences(document):
            language = (region.lexemes["language"] or "").strip().split()[0:1]
            language = language[0].lower() if language else ""
            source = str(region.lexemes["source"])
            first = source.splitlines()[0] if source.strip() else ""
            name = FILE_MARK.match(first).group(1) if FILE_MARK.match(first) else None
            # The comment's region may end before its `-->`: only that and white space may lie
            # between it and the fence.
            preceding = [
                end for end in named
                if end <= region.start
                and document.text[end:region.start].replace("-->", "", 1).strip() == ""
            ]
            if name is None and preceding:
                name = named[preceding[0]]
            if name is not None:
                evaluator = _writer(name)
            elif language == "python":
                continue  # PythonBlocks
            elif language == "console":
                evaluator = evaluate_console
            elif language in ("sh", "bash"):
                evaluator = evaluate_script
            elif language in MUST_BE_FILES:
                evaluator = _refuse(language)
            else:
                continue  # a display (text, json, toml, ...)
            yield Region(region.start, region.end, source, evaluator)


class PythonBlocks(PythonCodeBlockParser):
    """Sybil's Python blocks and doctests, except blocks written to a file."""

    def __call__(self, document):
        for region in super().__call__(document):
            if not FILE_MARK.match(str(region.parsed).splitlines()[0] if region.parsed else ""):
                yield region


pytest_collect_file = Sybil(
    parsers=[SkipParser(), BlockParser(), PythonBlocks(doctest_optionflags=FLAGS)],
    # Path.match from the right: any Markdown file under the paths pytest is given
    # (scripts/test-docs.sh: README.md and docs/), but not the generated reference.
    patterns=["*.md"],
    excludes=["reference/generated/*.md"],
    path=str(REPO),
    setup=setup,
    teardown=teardown,
    document_types={".md": Page},
).pytest()

_skipped = []


def pytest_runtest_logreport(report):
    if report.skipped and report.when in ("setup", "call"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped.append((report.nodeid, reason.replace("Skipped: ", "", 1)))


def pytest_terminal_summary(terminalreporter):
    """Lists every block a page marks as not run, with the page, the line and the reason."""
    terminalreporter.section("blocks marked as not run (<!-- skip: next \"reason\" -->)")
    if not _skipped:
        terminalreporter.write_line("none")
    for nodeid, reason in _skipped:
        page, _, where = nodeid.partition("::")
        line = where.split(",")[0].replace("line:", "line ")
        terminalreporter.write_line(f"{page} {line}: {reason}")
