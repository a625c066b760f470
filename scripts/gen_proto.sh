#!/usr/bin/env bash
# Generate the Python gRPC modules for proto/qm/v1/*.proto.
#
# Output: libs/quartermaster/src/quartermaster/api/qm/v1/{*_pb2.py,*_pb2.pyi,*_pb2_grpc.py},
# importable as quartermaster.api.qm.v1.<name>_pb2. protoc writes imports of other
# generated modules as `from qm.v1 import x_pb2`; they are rewritten to
# `from quartermaster.api.qm.v1 import x_pb2`.
#
# Usage: scripts/gen_proto.sh   (from anywhere; uses the active python, which
# needs grpcio-tools; falls back to the repo venv when present)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PYTHON="${PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then
    PYTHON="$ROOT/.venv/bin/python"
  else
    PYTHON="python3"
  fi
fi

API_DIR="libs/quartermaster/src/quartermaster/api"
OUT_DIR="$API_DIR/qm/v1"

# Start clean so removed .proto files leave no stale modules behind.
mkdir -p "$OUT_DIR"
find "$OUT_DIR" -maxdepth 1 -type f \( -name '*_pb2.py' -o -name '*_pb2.pyi' -o -name '*_pb2_grpc.py' \) -delete

mapfile -t PROTOS < <(find proto/qm/v1 -name '*.proto' | sort)
if [[ ${#PROTOS[@]} -eq 0 ]]; then
  echo "gen_proto: no .proto files under proto/qm/v1" >&2
  exit 1
fi

"$PYTHON" -m grpc_tools.protoc \
  -Iproto \
  --python_out="$API_DIR" \
  --pyi_out="$API_DIR" \
  --grpc_python_out="$API_DIR" \
  "${PROTOS[@]}"

# Make the generated package importable as quartermaster.api.qm.v1.
for d in "$API_DIR" "$API_DIR/qm" "$OUT_DIR"; do
  [[ -f "$d/__init__.py" ]] || : > "$d/__init__.py"
done

# Rewrite cross-module imports (`from qm.v1 import x_pb2 as ...`, also `import qm.v1.x_pb2`).
sed -i -E \
  -e 's/^from qm\.v1 import /from quartermaster.api.qm.v1 import /' \
  -e 's/^import qm\.v1\.([A-Za-z0-9_]+_pb2)/from quartermaster.api.qm.v1 import \1/' \
  "$OUT_DIR"/*_pb2.py "$OUT_DIR"/*_pb2.pyi "$OUT_DIR"/*_pb2_grpc.py

echo "gen_proto: generated ${#PROTOS[@]} proto file(s) into $OUT_DIR"
