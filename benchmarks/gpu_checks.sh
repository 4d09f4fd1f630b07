#!/usr/bin/env bash
# The CUDA checks, as one short script for a GPU machine (the device tool's `run`, under 8 minutes on one
# GPU): the C kernels built, the CUDA test modules, and gpu_check_hq.py (HQ-size evaluation on the GPU
# against the GPU's own FP32/TF32 GEMM of that shape and against the CPU's metrics and ranks).
# GPU_CHECKS_LONG=1 adds the long items: the kernel benchmark, bench_evaluator at HQ, the phases, the
# distributed evaluator with NCCL at HQ scale and the cost curve to 4.6 M entities (bench_scale.py).
# Logs go to $OUT (or ./gpu_out). Packages missing on that machine travel as wheels in .whl/ (carried).
set -u -o pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PYTHONPATH:/tmp/site || exit 1
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c 'import torch, polars; print("torch", torch.__version__, "cuda", torch.version.cuda, "polars", polars.__version__)' | tee -a "$OUT/gpu.txt"
python3 setup.py -q build_ext --inplace >"$OUT/build.log" 2>&1 || echo "C kernels not built; torch fallback on CPU"
status=0
python3 -m pytest -q -p no:cacheprovider tests/evaluation/test_cuda.py tests/evaluation/test_kernels.py 2>&1 \
  | tee "$OUT/test_cuda.log" || status=1
python3 benchmarks/gpu_check_hq.py --device cuda --work /tmp/gpu-check --json "$OUT/gpu_check_hq.json" 2>&1 \
  | tee "$OUT/gpu_check_hq.log" || status=1
# the repurposing matrix at PrimeKG's size on the GPU against the GPU's own GEMM of that shape
python3 benchmarks/bench_repurposing.py --device cuda --json "$OUT/bench_repurposing_cuda.json" 2>&1 \
  | tee "$OUT/bench_repurposing_cuda.log" || status=1
[ "${GPU_CHECKS_LONG:-0}" = 1 ] || exit "$status"

python3 benchmarks/bench_count_kernels.py --device cuda 2>&1 | tee "$OUT/bench_count_kernels.log"
python3 benchmarks/bench_evaluator.py --scale hq --device cuda --skip-peer --workdir /tmp/bench 2>&1 | tee "$OUT/bench_evaluator_hq.log"
python3 benchmarks/bench_phases.py /tmp/bench/synthetic-hq-0 --model TransE-L2 --device cuda 2>&1 | tee "$OUT/bench_phases_hq.log"
python3 benchmarks/bench_distributed.py --world "$(nvidia-smi -L | wc -l)" --device cuda --entities 184732 \
  --train 4192002 --test 183009 2>&1 | tee "$OUT/bench_distributed_hq.log"
# the cost curve of issue "Scale on one machine" on the GPU: 20 k to Wikidata5M's 4.6 M entities
python3 benchmarks/bench_scale.py --device cuda --work /tmp/bench-scale --json "$OUT/bench_scale_cuda.json" \
  --plot "$OUT/bench_scale_cuda.png" 2>&1 | tee "$OUT/bench_scale_cuda.log"
exit "$status"
