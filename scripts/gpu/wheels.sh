#!/usr/bin/env bash
# Wheels for the device machine (docs/scale.md, "verl on GPUs"): every distribution in
# scripts/gpu/packages.txt at this checkout's .venv version, for CPython 3.12 on x86-64, with Ray
# slimmed so that wheels and working tree fit the 64 MiB a device call carries (its Java jar and the
# dashboard's web build go: darwin starts Ray with include_dashboard=False and runs no Java workers).
#
#   bash scripts/gpu/wheels.sh [DEST]     # DEST defaults to .whl (ignored through .git/info/exclude)
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:-.whl}
python_version=${PYTHON_VERSION:-3.12}
mkdir -p "$dest"
grep -qxF "/$dest/" .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo "/$dest/" >> .git/info/exclude; }
pins=$(.venv/bin/python - <<'PY'
import importlib.metadata as md
names = [l.strip() for l in open("scripts/gpu/packages.txt") if l.strip() and not l.startswith("#")]
missing = []
for name in names:
    try:
        print(f"{name}=={md.version(name)}")
    except md.PackageNotFoundError:
        missing.append(name)
if missing:
    raise SystemExit(f"not installed in .venv (make install first): {missing}")
PY
)
for pin in $pins; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$python_version" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$dest" "$pin" 2>/dev/null ||
        # Published as a source archive only (pure Python, e.g. antlr4-python3-runtime 4.9.3): build its wheel here.
        .venv/bin/python -m pip wheel -q --no-deps -w "$dest" "$pin"
done
# Ray's libraries darwin does not use (RLlib, Data, Serve, Tune, Train, LLM) go too, and its three
# binaries lose their symbol tables.
.venv/bin/python scripts/gpu/slim_wheel.py "$dest"/ray-*.whl --drop ray/jars/ --drop ray/dashboard/client/build/ \
    --drop ray/rllib/ --drop ray/data/ --drop ray/serve/ --drop ray/tune/ --drop ray/train/ --drop ray/llm/ \
    --strip ray/_raylet.so --strip ray/core/src/ray/gcs/gcs_server --strip ray/core/src/ray/raylet/raylet
# transformers 5.10 refuses at import a tokenizers above 0.23.0; the image's is 0.23.2, and carrying
# 0.22 (3 MB) would not fit: its bound is widened to the 0.23 series (measured: darwin's verl path runs).
.venv/bin/python scripts/gpu/slim_wheel.py "$dest"/transformers-*.whl --replace \
    transformers/dependency_versions_table.py '"tokenizers>=0.22.0,<=0.23.0"' '"tokenizers>=0.22.0,<0.24"'
du -ch "$dest"/*.whl | tail -1
