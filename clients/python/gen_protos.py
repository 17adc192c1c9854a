"""Generates the ferry.v1 protobuf/gRPC modules with grpcio-tools.

    python gen_protos.py [PROTO_ROOT]

PROTO_ROOT defaults to ../../proto (the repository's wire contract; env
FERRY_PROTO_ROOT overrides it). Output: src/ferry/v1/processor_pb2.py,
processor_pb2.pyi and processor_pb2_grpc.py. They are build products (see
.gitignore): never edit them, re-run this instead. tools/setup_sdks and the
package build (setup.py) call it.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = ["ferry/v1/processor.proto"]


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
    args = [
        "grpc_tools.protoc",
        f"-I{root}",
        f"-I{well_known}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *PROTOS,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("gen_protos: grpc_tools.protoc failed")


if __name__ == "__main__":
    generate(proto_root())
