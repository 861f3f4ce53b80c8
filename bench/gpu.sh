#!/usr/bin/env bash
# End-to-end check on a CUDA GPU (not part of the test suite): `bench/gpu.sh` or `make gpu`.
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
timeout 600 "$PY" -m bench.gpu_check "$@"
TOKENS="${SCALING_TOKENS:-100000000}"
if [ "$TOKENS" != 0 ]; then
  timeout 3600 "$PY" -m bench training --scaling --tokens "$TOKENS"
fi
