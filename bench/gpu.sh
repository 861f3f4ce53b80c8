#!/usr/bin/env bash
# End-to-end check on a CUDA GPU (not part of the test suite): `bench/gpu.sh` or `make gpu`.
# First the round-cost tables of the real verifiers on the GPU (SmolLM2-135M and Gemma 3 270M, fp32 and fp16, each
# with its reference check: CPU fp32 references teacher-forced on the GPU), written as the JSON files
# `greenspec costs import FILE` reads, into COSTS_DIR (default $OUT/gpu-costs where $OUT is set, else gpu-costs);
# COSTS_DEVICE=none skips them, COSTS_DEVICE=cpu makes them on the CPU (a dry run), COSTS_MODELS picks the models.
# Builds random-weight Mistral models offline, runs a small sweep in both verifier regimes with NVML power
# sampling, checks exact greedy output, cuda placement and measured energy, and prints a short report
# (about 2-4 minutes). Needs a CUDA build of torch in the venv (the Makefile installs the CPU wheel).
# Extra arguments go to bench/gpu_check.py, e.g. `bench/gpu.sh --device cpu --power estimate` (dry run).
# Then the training scaling curve over 1, 2, 4, ... Ray workers up to the machine's cores (the GPU machine's CPUs
# are the widest in reach): `bench training --scaling` on SCALING_TOKENS tokens (default 10^8; 0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
if [ "${1:-}" != "--device" ] && command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
fi
export RAY_AUTH_MODE=disabled TOKENIZERS_PARALLELISM=false PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
COSTS_DEVICE="${COSTS_DEVICE:-cuda}"
COSTS_DIR="${COSTS_DIR:-${OUT:+$OUT/}gpu-costs}"
if [ "$COSTS_DEVICE" != none ]; then
  mkdir -p "$COSTS_DIR"
  for model in ${COSTS_MODELS:-smollm2-135m gemma3-270m}; do
    for dtype in float32 float16; do
      file="$COSTS_DIR/$model-$COSTS_DEVICE-$dtype.json"
      echo "== round-cost table: $model on $COSTS_DEVICE, $dtype -> $file"
      timeout 300 "$PY" -m orchestrator.cli costs measure --verifier "$model" --device "$COSTS_DEVICE" \
        --dtype "$dtype" --budget-s 40 --out "$file" --force || echo "round-cost table $model $dtype: failed"
    done
  done
fi
timeout 600 "$PY" -m bench.gpu_check "$@"
TOKENS="${SCALING_TOKENS:-100000000}"
if [ "$TOKENS" != 0 ]; then
  timeout 3600 "$PY" -m bench training --scaling --tokens "$TOKENS"
fi
