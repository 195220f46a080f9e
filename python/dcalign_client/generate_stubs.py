#!/usr/bin/env python3
"""Generates the gRPC stubs of dcalign_client from the repository's .proto files.

    generate_stubs.py [--proto-dir DIR] [--out DIR]

Runs protoc (Debian: protobuf-compiler) with grpc_python_plugin (protobuf-compiler-grpc) on
proto/dcalign/service/v1/analyst.proto and proto/grpc/health/v1/health.proto, and writes the
modules flat into --out (default: dcalign_client/_proto beside this script), with the generated
absolute imports (``from dcalign.service.v1 import analyst_pb2``) made relative, so that the stubs
never claim the top-level names ``dcalign`` (the Python bindings) or ``grpc`` (grpcio).

The descriptors keep their .proto names (dcalign/service/v1/analyst.proto), as in the C++ build.
Only the standard library is used: setup.py runs this file at build time.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_PROTO_DIR = HERE.parent.parent / "proto"
DEFAULT_OUT = HERE / "dcalign_client" / "_proto"
# .proto file (relative to the proto dir) -> module base name in the output package.
PROTOS = {
    "dcalign/service/v1/analyst.proto": "analyst",
    "grpc/health/v1/health.proto": "health",
}


def _tool(env: str, name: str) -> str:
    path = os.environ.get(env) or shutil.which(name)
    if not path:
        sys.exit(f"generate_stubs: '{name}' not found (set {env}; Debian: apt-get install "
                 "protobuf-compiler protobuf-compiler-grpc)")
    return path


def generate(out: Path = DEFAULT_OUT, proto_dir: Path = DEFAULT_PROTO_DIR) -> list[Path]:
    """Writes analyst_pb2(_grpc).py, health_pb2(_grpc).py and __init__.py into `out`."""
    proto_dir = Path(proto_dir).resolve()
    for rel in PROTOS:
        if not (proto_dir / rel).is_file():
            raise FileNotFoundError(f"generate_stubs: {proto_dir / rel} does not exist")
    protoc = _tool("PROTOC", "protoc")
    plugin = _tool("GRPC_PYTHON_PLUGIN", "grpc_python_plugin")
    out = Path(out)
    with tempfile.TemporaryDirectory(prefix="dcalign-stubs-") as tmp:
        subprocess.run([protoc, f"-I{proto_dir}", f"--python_out={tmp}", f"--grpc_python_out={tmp}",
                        f"--plugin=protoc-gen-grpc_python={plugin}", *PROTOS],
                       cwd=proto_dir, check=True)
        # "from dcalign.service.v1 import analyst_pb2 as ..." -> "from . import analyst_pb2 as ..."
        modules = {Path(rel).parent.as_posix().replace("/", "."): base
                   for rel, base in PROTOS.items()}
        pattern = re.compile(r"^from (%s) import (\w+_pb2)\b" %
                             "|".join(re.escape(m) for m in modules), re.M)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for rel, base in PROTOS.items():
            for suffix in ("_pb2.py", "_pb2_grpc.py"):
                src = Path(tmp) / Path(rel).parent / (base + suffix)
                text = pattern.sub(r"from . import \2", src.read_text())
                dst = out / (base + suffix)
                dst.write_text(text)
                written.append(dst)
        init = out / "__init__.py"
        init.write_text('"""gRPC stubs generated from proto/ by generate_stubs.py: '
                        'do not edit, do not commit."""\n')
        written.append(init)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--proto-dir", type=Path, default=DEFAULT_PROTO_DIR,
                    help="the repository's proto/ directory (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT,
                    help="the package directory to write (default: %(default)s)")
    args = ap.parse_args(argv)
    for p in generate(args.out, args.proto_dir):
        print(f"generate_stubs: wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
