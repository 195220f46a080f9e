"""The build step generates the gRPC stubs from the repository's proto/ (generate_stubs.py),
into the built package only: the stubs are never written into, or committed with, the sources.
Set DCALIGN_PROTO_DIR when building outside the repository."""
import importlib.util
import os
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildWithStubs(build_py):
    def run(self):
        super().run()
        spec = importlib.util.spec_from_file_location("generate_stubs", HERE / "generate_stubs.py")
        gen = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(gen)
        proto_dir = Path(os.environ.get("DCALIGN_PROTO_DIR", gen.DEFAULT_PROTO_DIR))
        gen.generate(Path(self.build_lib) / "dcalign_client" / "_proto", proto_dir)


setup(cmdclass={"build_py": BuildWithStubs})
