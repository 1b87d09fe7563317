#!/usr/bin/env bash
# The main job, on the embedded CPU default: set-up (idempotent), WMRL training of the grammar
# policy on the MLE train split with the fused reward, then held-out evaluation by real
# execution of the untrained and the trained policy. Output: runs/<name>/ (results.md, plots,
# metrics.csv, TensorBoard events, checkpoint). Extra arguments go to `wmrl train` and override
# these. Anchors train 8 steps late and the last 8 steps choose none (issue 47's registered
# confirmation, bench/results/async_anchors_confirm_reading.md); `--max-staleness 0` is synchronous.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
source scripts/_env.sh
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
name="main-$(date +%Y%m%d-%H%M%S)"
exec "$PY" -m trainers.cli train --env wmrl/MLEDojo-v0 --mode wmrl --policy grammar \
  --steps 24 --tasks-per-step 8 --group-size 4 --eval-k 4 --max-staleness 8 --final-anchors skip \
  --output-dir "runs/$name" "$@"
