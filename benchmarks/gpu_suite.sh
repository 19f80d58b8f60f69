#!/usr/bin/env bash
# Everything that needs a CUDA GPU, in one go, most telling first (a lease may end early): the
# 1 x 5 latency of the nine embedding metrics on the hub-sized `bench` profile (with CUDA graphs,
# then without), the CLIP-S throughput benchmark (256 pairs over 64 images, 4,096 pairs over
# 1,024), the decoding stages, the CUDA tests and the precision measurement.
# Logs go to $OUT (default ./gpu-suite-out); SKIP="precision ..." leaves steps out; VARIANTS="read-first,..."
# times CapLens changed in one way each (bench_clipscore.py --variants). From the repository root:
#     bash benchmarks/gpu_suite.sh
set -u
OUT=${OUT:-$PWD/gpu-suite-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export CAPLENS_DATA_DIR=${CAPLENS_DATA_DIR:-/tmp/caplens-data} CAPLENS_BENCH_DIR=${CAPLENS_BENCH_DIR:-/tmp/caplens-bench}
PY=${PY:-python3}

step() {  # step NAME SECONDS COMMAND...: run with a time limit, log to $OUT/NAME.log
    local name=$1 limit=$2; shift 2
    if [[ " ${SKIP:-} " == *" $name "* ]]; then echo "== $name skipped"; return; fi
    echo "== $name ($(date +%T))"
    local start=$SECONDS
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    echo "   exit $? after $((SECONDS - start)) s"
    tail -n 40 "$OUT/$name.log"
}

{
    nvidia-smi --query-gpu=name,memory.total,memory.used,utilization.gpu,clocks.sm --format=csv
    $PY -c "import torch, torchvision, transformers; print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'transformers', transformers.__version__, 'cpus', __import__('os').cpu_count())"
} 2>&1
step build 90 $PY -m scoring.bench "$CAPLENS_BENCH_DIR"
step latency 100 $PY benchmarks/bench_latency.py --profile bench --repeats 10 --api --cprofile 25
CAPLENS_CUDA_GRAPHS=0 step latency-eager 70 $PY benchmarks/bench_latency.py --profile bench --repeats 5
step clipscore 180 $PY benchmarks/bench_clipscore.py --sizes ${SIZES:-256:64,4096:1024} --repeats ${REPEATS:-5} --baseline-repeats ${BASELINE_REPEATS:-2} --cprofile 25 --json "$OUT/clipscore.json" --trace "$OUT/trace" --variants "${VARIANTS:-}"
step decode 60 $PY benchmarks/bench_decode.py --images 1024 --repeats 3
step tests 100 $PY -m pytest -q -p no:cacheprovider ${TESTS:-tests/scoring/test_gpu.py tests/scoring/test_pixels.py tests/scoring/test_graphs.py tests/scoring/test_batching.py tests/scoring/test_clip_parity.py tests/scoring/test_learned_metrics.py}
step precision 100 $PY benchmarks/bench_precision.py --profiles world,bench --pairs 256
# Where each thread's time goes while scoring 4,096 pairs (py-spy: Python and native frames,
# idle threads too), when $PYSPY names a py-spy binary; benchmarks/threads_profile.py reads it.
if [ -n "${PYSPY:-}" ]; then
    step threads 120 "$PYSPY" record --idle --threads --native --rate 200 --format raw --output "$OUT/threads.txt" -- \
        $PY benchmarks/bench_clipscore.py --sizes 4096:1024 --repeats 5 --baseline-repeats 0
fi
