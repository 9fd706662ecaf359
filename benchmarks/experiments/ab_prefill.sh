#!/usr/bin/env bash
# A/B of prefill on the GPU machine: the previous wheel (carried in .device/old), then the current one (dist/), twice
# each.  bash benchmarks/experiments/ab_prefill.sh
for w in .device/old dist .device/old dist; do
  python3 -m pip install -q --force-reinstall --no-deps --no-index $w/xops_aot-*.whl 2>&1 | tail -1
  echo "=== $w"
  python3 benchmarks/experiments/prefill_only.py $([[ $w == dist ]] && echo --peers) 2>&1 | tail -12
done
