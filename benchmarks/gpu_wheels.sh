#!/usr/bin/env bash
# Fetch, on this machine, the wheels mlmkit needs that the device machine's image lacks
# (it reaches no package registry), into .whl/ at the repository root: git ignores it and
# the device tool's `carry` takes it along (64 MiB at most per call; these are ~1 MiB).
# The image's Python is 3.12 with torch, transformers, tokenizers, pyarrow, pandas and
# fsspec already there (/work/.library/device/KINDS.md); `datasets` (imported by
# mlmkit.corpus) and its dill/multiprocess are not. benchmarks/gpu_check.sh installs these
# wheels there only if `import datasets` fails.
#
#     bash benchmarks/gpu_wheels.sh        # then: the run call in docs/DEVELOPING.md
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
PYTHON=${PYTHON:-python3}
WHEELS=(datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19)

exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")" .whl
grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >>"$exclude"
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl "${WHEELS[@]}"
ls -l .whl
