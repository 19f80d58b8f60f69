#!/usr/bin/env bash
# Training runs that need a GPU's hours on 2 cores, on a lent CUDA machine (the `run` tool):
# each preset of $PRESETS (default: CapLens-R's cross mode at GPU scale) trains with its own
# time_limit_s, and its run folder (model, training.json with the validation history) comes
# back as $OUT/<preset>.tar.gz beside its log. World data is generated there, in parallel.
# From the repository root:
#     bash benchmarks/gpu_train.sh
set -u
OUT=${OUT:-$PWD/gpu-train-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export CAPLENS_DATA_DIR=${CAPLENS_DATA_DIR:-/tmp/caplens-data}
PY=${PY:-python3}
nvidia-smi --query-gpu=name,memory.total --format=csv 2>&1
for preset in ${PRESETS:-caplens-r-cross-gpu}; do
    run=$CAPLENS_DATA_DIR/runs/$preset
    echo "== $preset ($(date +%T))"
    start=$SECONDS
    timeout "${LIMIT:-590}" $PY - "$preset" "$run" > "$OUT/$preset.log" 2>&1 <<'PY'
import sys
from scoring.training import load_config, train
result = train(load_config(sys.argv[1], out=sys.argv[2]), log=print)
print("wall_s", result.wall_s, "device", result.device)
PY
    echo "   exit $? after $((SECONDS - start)) s"
    tail -n 30 "$OUT/$preset.log"
    [ -f "$run/training.json" ] && tar -czf "$OUT/$preset.tar.gz" -C "$run" --exclude=.resume .
done
