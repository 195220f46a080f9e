"""The role {repo}`path`: a file or directory of the repository, checked at build time.

Renders the path as code. A path that does not exist in the checkout is a warning (so an error
under -W): a page cannot point at a file that was moved or deleted. A trailing `/` names a
directory; `path:line` and `#anchor` suffixes are not accepted, so that the check is exact.
"""
from pathlib import Path

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)


def repo_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    app = inliner.document.settings.env.app
    root = Path(app.config.dcalign_repo)
    rel = text.strip()
    target = root / rel
    if rel.startswith("/") or ".." in Path(rel).parts or not target.exists():
        logger.warning(
            "repository path %r does not exist (role {repo})", rel,
            location=(inliner.document.settings.env.docname, lineno),
        )
    elif rel.endswith("/") and not target.is_dir():
        logger.warning(
            "repository path %r is not a directory", rel,
            location=(inliner.document.settings.env.docname, lineno),
        )
    node = nodes.literal(rawtext, rel, classes=["repo-path"])
    return [node], []


def setup(app):
    app.add_config_value("dcalign_repo", None, "env")
    app.add_role("repo", repo_role)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
