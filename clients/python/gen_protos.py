"""Generates the ferry.v1 protobuf/gRPC modules of ferry_worker with grpcio-tools.

    python gen_protos.py [PROTO_ROOT]

PROTO_ROOT defaults to ../../proto (the repository's wire contract; env
FERRY_PROTO_ROOT overrides it). Output: src/ferry_worker/v1/processor_pb2.py,
processor_pb2.pyi and processor_pb2_grpc.py. They are build products (see
.gitignore): never edit them, re-run this instead. tools/setup_sdks and the
package build (setup.py) call it.

protoc names Python modules after the proto's path (ferry/v1/...), but the
import package is ferry_worker (a top-level `ferry` collides with unrelated
PyPI distributions), so the protos are compiled from a copy laid out as
ferry_worker/v1/ (processor.proto imports nothing else of ferry's). The wire
names (package ferry.v1) are unchanged.
"""

import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = ["ferry/v1/processor.proto"]
PACKAGE = "ferry_worker"


def proto_root(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        return os.path.abspath(argv[0])
    return os.path.abspath(
        os.environ.get("FERRY_PROTO_ROOT") or os.path.join(HERE, "..", "..", "proto")
    )


def generate(root, out=os.path.join(HERE, "src")):
    from grpc_tools import protoc  # imported late: only the build needs grpcio-tools

    import importlib.resources

    well_known = str(importlib.resources.files("grpc_tools") / "_proto")
    for proto in PROTOS:
        if not os.path.exists(os.path.join(root, proto)):
            raise SystemExit(f"gen_protos: {proto} not found under {root}")
    with tempfile.TemporaryDirectory(prefix="ferry_worker_protos") as staged:
        renamed = []
        for proto in PROTOS:
            target = os.path.join(PACKAGE, os.path.relpath(proto, "ferry"))
            os.makedirs(os.path.join(staged, os.path.dirname(target)), exist_ok=True)
            shutil.copyfile(os.path.join(root, proto), os.path.join(staged, target))
            renamed.append(target)
        args = [
            "grpc_tools.protoc",
            f"-I{staged}",
            f"-I{well_known}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            *renamed,
        ]
        if protoc.main(args) != 0:
            raise SystemExit("gen_protos: grpc_tools.protoc failed")


if __name__ == "__main__":
    generate(proto_root())
