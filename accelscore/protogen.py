"""Generate the Python gRPC modules from `proto/` (used by `make protos` and the drift test)."""

from __future__ import annotations

import sys
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent.parent / "proto"
PROTO_FILES = (
    "accelscore/v1/report.proto",
    "accelscore/vendor/podresources/v1/api.proto",
    "accelscore/vendor/tpu/tpu_metric_service.proto",
    "accelscore/vendor/cel/expr/syntax.proto",  # the checked AST of user-defined scores (custom_scores)
    "accelscore/vendor/cel/expr/checked.proto",
)


def generate(out_dir: Path) -> None:
    """Run protoc (from grpcio-tools) for every proto into `out_dir`, with `.pyi` stubs."""
    import grpc_tools
    from grpc_tools import protoc  # test/dev dependency only

    include = Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *PROTO_FILES,
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed: {' '.join(args)}")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else PROTO_ROOT.parent)
