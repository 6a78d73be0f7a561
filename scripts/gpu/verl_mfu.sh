#!/usr/bin/env bash
# The verl learner's GPU measurement (docs/benchmarks.md, "The verl learner on a GPU"), prepared to
# run in one device call of under 10 minutes on one H100 or H200:
#
#   bash scripts/gpu/wheels.sh                 # here, once: .whl (Python 3.12 wheels, ~54 MB)
#   # the device call, carrying .whl:
#   bash scripts/gpu/verl_mfu.sh 1b-fused 2b      # the next measurement (docs/benchmarks.md); steps below
#
# It installs darwin and the wheels beside the image's CUDA torch, then runs the named steps, each
# under its own timeout, writing to $OUT: bench.jsonl (one line per update: tokens/s, MFU of the
# training passes and of the whole update, peak memory, seconds per phase), a log per step,
# nvidia-smi.txt, env.txt and dmon.txt (the GPU's load every second). Steps:
#   1b-fused    ~1.3 B Qwen2.5-VL-shaped model, 128 paper-shaped rows, token-budgeted micro-batches, the
#               actor's log-probs from fused chunks of its LM head (the paper preset's setting)
#   1b-128      the same with the whole logits: the H200 record of 2026-11-28 (MFU 4.0% in training)
#   1b-triton   1b-fused with verl's Triton kernel
#   1b-tokens   256 rows, fused
#   2b          ~2.0 B on 128 rows, fused, both roles resident (2 x 32 GB of fp32 weights, grads and Adam:
#               fits an H200's 139 GiB); on a GPU of under 100 GiB it offloads as 2b-offload does
#   2b-offload  256 rows, parameters and optimizer states offloaded between calls (for an H100's 78 GiB)
#   1b-rows     the 1b model with 4 rows per micro-batch: the settings of the 2026-11-26 H100 record
#   probe       the 1b model on 64 rows, with /dev/shm and /tmp sizes: where an update's time goes
#   tests       pytest -m gpu on the verl learner's GPU tests
# Each step builds its model and starts Ray afresh: about 2 minutes before its update starts (H200).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/darwin-gpu}
mkdir -p "$out"
site=/tmp/darwin-site
wheels=${WHEELS:-.whl}  # the carried wheels (WHEELS=.whl311 rehearses the script on a Python 3.11 machine)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$wheels"/*.whl || exit 1
PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH} python3 -m pip install -q --no-deps --no-build-isolation --no-compile --no-cache-dir --upgrade \
    --target "$site" . > "$out/env.txt" 2>&1 || { tail -20 "$out/env.txt"; exit 1; }
# python3 -P: darwin from $site, as installed (package-dir maps darwin.envs to envs/), never the checkout's folder.
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
# The GPU's load every second for the whole call: an idle GPU during an update is time spent in Python or Ray.
nvidia-smi dmon -s um -d 1 -o T > "$out/dmon.txt" 2>&1 &
{
    python3 -c "import torch, transformers, tokenizers, verl, ray; print('torch', torch.__version__, torch.version.cuda, \
'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__, 'verl', verl.__version__, 'ray', ray.__version__)"
    python3 -c "import flash_attn; print('flash-attn', flash_attn.__version__)" 2>/dev/null ||
        echo "flash-attn: not installed (sdpa attention; rows keep their padding inside a micro-batch)"
} >> "$out/env.txt" 2>&1
cat "$out/env.txt" | tail -2; echo "installed at ${SECONDS}s"

bench() {  # name, timeout, bench arguments
    local name=$1 limit=$2
    shift 2
    timeout "$limit" python3 -P -c "from darwin.cli.main import main; main()" --log-level info bench learner --backend verl --device cuda \
        --workers 1 --rows paper --steps 256 --mini 64 --epochs 1 --phase ppo "$@" > "$out/$name.log" 2>&1
    echo "$name: exit $? at ${SECONDS}s"
    # A step cut off by its limit leaves Ray's workers holding GPU memory: end them before the next.
    pkill -9 -f 'ray::|raylet|gcs_server|DarwinTrainingWorker' 2>/dev/null
    grep -a "verl prepare\|verl update" "$out/$name.log" | cut -c1-160
    grep '^{"device"' "$out/$name.log" | sed "s/^{/{\"step\": \"$name\", /" | tee -a "$out/bench.jsonl"
}

for step in "${@:-1b-fused}"; do
    case $step in
        1b-fused) bench 1b-fused 250 --size 1b --steps 128 --token-budget 16384 --fused-kernels torch ;;
        1b-128) bench 1b-128 270 --size 1b --steps 128 --token-budget 16384 ;;
        1b-triton) bench 1b-triton 250 --size 1b --steps 128 --token-budget 16384 --fused-kernels triton ;;
        1b-tokens) bench 1b-tokens 300 --size 1b --token-budget 16384 --fused-kernels torch ;;
        2b)
            gib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
            bench 2b 270 --size 2b --steps 128 --token-budget 16384 --fused-kernels torch \
                $([ "${gib:-0}" -lt 102400 ] && echo --offload)
            ;;
        2b-offload) bench 2b-offload 330 --size 2b --token-budget 16384 --fused-kernels torch --offload ;;
        1b-rows) bench 1b-rows 270 --size 1b --micro 4 ;;
        probe)  # where an update's time goes, in what is left of a device lease: 64 rows, Ray's object store
            { df -h /dev/shm /tmp; free -g; } | tee "$out/machine.txt"
            bench probe 190 --size 1b --steps 64 --mini 32 --token-budget 16384
            ;;
        tests)
            timeout 400 python3 -P -m pytest -m gpu -q -p no:cacheprovider tests/learner/test_verl_gpu.py \
                tests/learner/test_verl_learner.py > "$out/gpu-tests.log" 2>&1
            echo "tests: exit $?"
            tail -3 "$out/gpu-tests.log"
            ;;
        *) echo "unknown step $step: use 1b-fused, 1b-128, 1b-triton, 1b-tokens, 2b, 2b-offload, 1b-rows, probe or tests" >&2; exit 2 ;;
    esac
done
