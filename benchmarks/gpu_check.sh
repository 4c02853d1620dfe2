#!/usr/bin/env bash
# The one prepared GPU check, for a session that is lent a GPU machine through the device
# tool (its budget: 10 minutes a command, 15 minutes a session, starts included). In one
# command, from the repository root, within $GPU_CHECK_SECONDS (default 540):
#
#   1. the machine and its packages into $OUT/env.txt; the wheels of .whl/
#      (benchmarks/gpu_wheels.sh, carried) installed only if `import datasets` fails;
#   2. tests/test_cuda.py on the GPU  -> $OUT/test_cuda.log, $OUT/test_cuda.xml
#      (at most $GPU_CHECK_TEST_SECONDS, default 220; 0 skips them);
#   3. benchmarks/pretrain.py --section gpu (mlmkit vs HF Trainer, ModernBERT-base and
#      BERT-base, seq 1,024 then 512)  -> $OUT/gpu_bench.log, $OUT/gpu_bench.json (the rows
#      are written as they finish: a run cut short by the time limit keeps the earlier ones;
#      more arguments in $GPU_CHECK_BENCH_ARGS, e.g. "--seq-lens 512");
#   4. benchmarks/data_path.py (the host side, per CPU core) if 40 s are left.
#
# The exact `run` call is in docs/DEVELOPING.md ("GPU checks"). Rehearse it on a CPU
# (tests with MLMKIT_TEST_DEVICE=cpu, the benchmark's smoke mode):
#     GPU_CHECK_DEVICE=cpu OUT=/tmp/gpu-check bash benchmarks/gpu_check.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/mlmkit-gpu-check}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)  # the benchmark runs from benchmarks/
PYTHON=${PYTHON:-python3}
DEVICE=${GPU_CHECK_DEVICE:-cuda}
BUDGET=${GPU_CHECK_SECONDS:-540}
TEST_SECONDS=${GPU_CHECK_TEST_SECONDS:-220}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
START=$SECONDS
left() { echo $((BUDGET - (SECONDS - START))); }

# ---- 1. the machine, the packages
{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || true
    nproc
} >"$OUT/env.txt" 2>&1
if ! "$PYTHON" -c "import datasets" 2>/dev/null; then
    if ls .whl/*.whl >/dev/null 2>&1; then
        "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
            --upgrade --target /tmp/mlmkit-site .whl/*.whl >>"$OUT/env.txt" 2>&1
        export PYTHONPATH=/tmp/mlmkit-site
    else
        echo "datasets is missing and no .whl/ was carried: run benchmarks/gpu_wheels.sh" \
            "here and name .whl in carry" | tee -a "$OUT/env.txt"
    fi
fi
export PYTHONPATH="$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PYTHON" - >>"$OUT/env.txt" 2>&1 <<'EOF'
import importlib, sys
print("python", sys.version.split()[0], sys.executable)
for name in ("torch", "transformers", "tokenizers", "datasets", "accelerate", "pyarrow",
             "numpy", "triton", "fastapi"):
    try:
        print(name, importlib.import_module(name).__version__)
    except Exception as error:  # a missing package is a line of the report
        print(name, "missing:", error)
import torch
print("cuda", torch.cuda.is_available(), torch.version.cuda,
      torch.cuda.get_device_name() if torch.cuda.is_available() else "")
import mlmkit.pretraining  # noqa: F401  (fails here, not in every test, if a package is missing)
print("mlmkit imports")
EOF
status=$?
cat "$OUT/env.txt"
if [ $status -ne 0 ]; then
    echo "mlmkit does not import on this machine: see $OUT/env.txt"
    exit 1
fi

# ---- 2. the CUDA tests (on the CPU in a rehearsal)
timeout_flag=()
"$PYTHON" -c "import pytest_timeout" 2>/dev/null && timeout_flag=(--timeout 150)
export MLMKIT_TEST_DEVICE=$DEVICE
if [ "$TEST_SECONDS" -gt 0 ]; then  # GPU_CHECK_TEST_SECONDS=0: the benchmark alone
    # SIGINT at the limit: pytest stops and still reports the failures so far
    timeout -s INT -k 20 "$TEST_SECONDS" "$PYTHON" -m pytest tests/test_cuda.py -v \
        -p no:cacheprovider --tb=short -rfEs --durations=15 --junitxml "$OUT/test_cuda.xml" \
        "${timeout_flag[@]}" >"$OUT/test_cuda.log" 2>&1
    echo "tests/test_cuda.py: exit $? after $((SECONDS - START)) s"
    grep -E "FAILED|ERROR|passed|failed" "$OUT/test_cuda.log" | tail -30
fi

# ---- 3. the benchmark: what is left of the budget, less a margin for step 4's report
bench=(--section gpu --device "$DEVICE" --json "$OUT/gpu_bench.json" ${GPU_CHECK_BENCH_ARGS:-})
[ "$DEVICE" = cpu ] && bench+=(--smoke)
seconds=$(($(left) - 25))
if [ "$seconds" -gt 30 ]; then
    (cd benchmarks && timeout -s INT -k 15 "$seconds" "$PYTHON" pretrain.py "${bench[@]}") \
        >"$OUT/gpu_bench.log" 2>&1
    echo "benchmarks/pretrain.py --section gpu: exit $? after $((SECONDS - START)) s"
    grep -v "it/s\]" "$OUT/gpu_bench.log" | tail -40
fi

# ---- 4. the host data path per core, if time is left
seconds=$(($(left) - 5))
if [ "$seconds" -gt 40 ]; then
    (cd benchmarks && timeout "$seconds" "$PYTHON" data_path.py --seq-len 512 --steps 4 \
        --policies default bert) >"$OUT/data_path.log" 2>&1
    tail -6 "$OUT/data_path.log"
fi
echo "done after $((SECONDS - START)) s; logs in $OUT"
