# Sphinx configuration of dcalign's documentation site (scripts/test-docs.sh builds it with
# warnings as errors). Pages are MyST Markdown; the C++ API comes from the public headers through
# Doxygen + Breathe, the Python API from the module's docstrings (autodoc), the CLI reference from
# the built `dcalign` itself (_ext/dcalign_cli.py).
import os
import re
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))

# Where the build tree is (the `dcalign` executables the CLI reference is generated from) and
# where generated inputs go: both outside the source tree's tracked files.
BUILD = Path(os.environ.get("DCALIGN_BUILD_DIR", REPO / "build")).resolve()
GENERATED = Path(os.environ.get("DCALIGN_DOCS_WORK", BUILD / "docs-work")).resolve()

project = "dcalign"
author = "the dcalign developers"
copyright = "2026, the dcalign developers"
release = version = re.search(r"project\(dcalign VERSION ([0-9.]+)", (REPO / "CMakeLists.txt").read_text()).group(1)

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "breathe",
    "dcalign_cli",
    "dcalign_repo",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "README.md", "**/README.md", "_ext"]
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]
myst_heading_anchors = 3
# Every cross-reference must resolve: a missing target (a page, a label, a C++ or Python name)
# is a warning, and warnings fail the build.
nitpicky = True
nitpick_ignore_regex = [
    # Types of the standard library, NumPy and LibTorch that the signatures mention.
    (r"cpp:.*", r"(std|torch|at|c10|detail)(::.*)?"),
    (r"cpp:identifier", r"(size_t|uint64_t|int64_t|uint8_t|int32_t|uint32_t|T|Real|Scalar)"),
    (r"py:class", r"(numpy\..*|np\..*|ArrayLike|optional|Any|pandas\..*|os\.PathLike.*)"),
]

html_theme = "furo"
html_title = f"dcalign {release}"
html_favicon = "_static/favicon.svg"
html_static_path = ["_static"]

# Formulas: MathJax 2 from Debian's libjs-mathjax, copied into the site (the part the pages use,
# about 1.5 MB), so that the site works offline and the build needs no CDN.
MATHJAX = Path("/usr/share/javascript/mathjax")
MATHJAX_PARTS = [
    "MathJax.js",
    "config/TeX-AMS_CHTML.js",
    "extensions",
    "jax/input/TeX",
    "jax/output/CommonHTML",
    "jax/element",
    "fonts/HTML-CSS/TeX/woff",
]


def _copy_mathjax():
    import shutil

    if not (MATHJAX / "MathJax.js").exists():
        raise RuntimeError(f"{MATHJAX}/MathJax.js not found: apt-get install libjs-mathjax "
                           "(scripts/install-deps.sh installs it)")
    dest = GENERATED / "static" / "mathjax"
    if not (dest / "MathJax.js").exists():
        for part in MATHJAX_PARTS:
            src, dst = MATHJAX / part, dest / part
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst, dirs_exist_ok=True)
            else:
                shutil.copyfile(src, dst)
    return str(dest.parent)


html_static_path.append(_copy_mathjax())
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS_CHTML"
mathjax2_config = {
    "tex2jax": {
        "inlineMath": [["\\(", "\\)"]],
        "displayMath": [["\\[", "\\]"]],
        "processEscapes": True,
        "ignoreClass": "document",
        "processClass": "math|output_area",
    }
}
html_css_files = ["dcalign.css"]
html_show_sourcelink = False
templates_path = []

# Python API: the installed module (scripts/test-docs.sh runs Sphinx with the interpreter that
# has it). autodoc imports it; nothing is mocked, so the docstrings are the module's own.
autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_google_docstring = False
napoleon_numpy_docstring = True
# Types in the docstrings are prose ("array of shape (c, a, l)"), not class names to resolve.
napoleon_use_param = False
napoleon_use_rtype = False
napoleon_use_ivar = True
add_module_names = False

# C++ API: Doxygen's XML of include/dcalign (not include/dcalign/detail), made here.
DOXYGEN_XML = GENERATED / "doxygen" / "xml"


def _run_doxygen():
    out = GENERATED / "doxygen"
    out.mkdir(parents=True, exist_ok=True)
    cfg = "\n".join(
        [
            f'INPUT = "{REPO / "include" / "dcalign"}"',
            "FILE_PATTERNS = *.hpp",
            "RECURSIVE = NO",
            f'OUTPUT_DIRECTORY = "{out}"',
            f'STRIP_FROM_INC_PATH = "{REPO / "include"}"',
            f'STRIP_FROM_PATH = "{REPO / "include"}"',
            "GENERATE_XML = YES",
            "GENERATE_HTML = NO",
            "GENERATE_LATEX = NO",
            "EXTRACT_ALL = YES",
            "EXTRACT_PRIVATE = NO",
            "EXTRACT_STATIC = YES",
            "HIDE_UNDOC_MEMBERS = NO",
            "EXCLUDE_SYMBOLS = detail detail::*",
            "ENABLE_PREPROCESSING = YES",
            "MACRO_EXPANSION = YES",
            "PREDEFINED = DCALIGN_WITH_CUDA=1",
            "QUIET = YES",
            "WARNINGS = YES",
            "WARN_AS_ERROR = FAIL_ON_WARNINGS",
            "WARN_IF_UNDOCUMENTED = NO",
            "JAVADOC_AUTOBRIEF = YES",
            "MARKDOWN_SUPPORT = NO",
            "AUTOLINK_SUPPORT = NO",
        ]
    )
    subprocess.run(["doxygen", "-"], input=cfg.encode(), check=True, cwd=out)
    # A header's name in a comment ("see learn.hpp") becomes a link to the file's page, which
    # this site does not have (one page for the namespace): keep the name, drop the link.
    # The same for the header a class is declared in (<includes refid=...>).
    file_ref = re.compile(r'<ref refid="[A-Za-z0-9_]+_8hpp" kindref="compound">(.*?)</ref>')
    include_ref = re.compile(r'(<includes) refid="[A-Za-z0-9_]+_8hpp"')
    for xml in (out / "xml").glob("*.xml"):
        text = xml.read_text()
        if "_8hpp" in text:
            xml.write_text(include_ref.sub(r"\1", file_ref.sub(r"\1", text)))


_run_doxygen()
breathe_projects = {"dcalign": str(DOXYGEN_XML)}
breathe_default_project = "dcalign"
breathe_domain_by_extension = {"hpp": "cpp"}
breathe_show_include = True

dcalign_cli_build = BUILD
dcalign_generated = GENERATED
dcalign_repo = REPO
