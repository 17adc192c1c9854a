"""Build hook: generate the ferry.v1 stubs from ../../proto before packaging.

All metadata is in pyproject.toml. When the proto tree is not there (building
from an sdist that already contains the generated modules) nothing is done.
"""

import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_protos  # noqa: E402


class BuildPyWithProtos(build_py):
    def run(self):
        root = gen_protos.proto_root([])
        if os.path.isdir(root):
            gen_protos.generate(root)
        super().run()


setup(cmdclass={"build_py": BuildPyWithProtos})
