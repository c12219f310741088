"""Regenerates the Python stubs beside ``urlfrontier.proto``: ``python -m
crawlstore.urlfrontier.regenerate``. Needs grpcio-tools, at the version the ``test`` extra pins
(the stubs record it, and the tests compare the committed stubs with a fresh generation)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTO = "urlfrontier.proto"
STUBS = ("urlfrontier_pb2.py", "urlfrontier_pb2.pyi", "urlfrontier_pb2_grpc.py")
# grpc_tools imports the messages module as a top-level one; inside the package it is a sibling
_ABSOLUTE = "import urlfrontier_pb2 as urlfrontier__pb2\n"
_RELATIVE = "from . import urlfrontier_pb2 as urlfrontier__pb2\n"


def generate(out: Path) -> None:
    """Writes the stubs of ``urlfrontier.proto`` into the directory ``out``."""
    out = out.resolve()
    # run from HERE with -I. as the upstream instructions do: the descriptor is "urlfrontier.proto"
    protoc = [sys.executable, "-m", "grpc_tools.protoc", "-I."]
    outputs = [f"--python_out={out}", f"--pyi_out={out}", f"--grpc_python_out={out}"]
    subprocess.run([*protoc, *outputs, PROTO], cwd=HERE, check=True)
    service = out / STUBS[2]
    text = service.read_text()
    if text.count(_ABSOLUTE) != 1:
        raise RuntimeError(f"{service.name}: expected one line {_ABSOLUTE.strip()!r}")
    service.write_text(text.replace(_ABSOLUTE, _RELATIVE))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        for name in STUBS:
            shutil.copyfile(Path(tmp) / name, HERE / name)


if __name__ == "__main__":
    main()
