#!/usr/bin/env bash
# Measure every calibration point on this machine's GPUs and write the calibration table.
#
#   tools/calibrate.sh OUT_DIR                         # presets 0.5B..7B x seq 2048,4096 x 1 and 2 GPUs
#   PRESETS="qwen2.5-7b-instruct" SEQ_LENS="2048" WORLDS="1 2 4 8" tools/calibrate.sh OUT_DIR
#
# Writes OUT_DIR/points/*.json (one per point, see tools/measure_memory.py), OUT_DIR/logs/*.log and
# OUT_DIR/memory_calibration.json, the table components/model/memory_calibration.json is a copy of.
# Points already in OUT_DIR/points are kept, so a second run fills in what the first left out.
# Points of one world size run side by side on disjoint GPUs (two 1-GPU points on a 2-GPU box), larger
# models first. Each point gets POINT_TIMEOUT seconds; an OOM or a timeout is recorded, not fatal.
# PRESETS_FILE: presets exported by `python tools/measure_memory.py presets --out FILE` where the repository's
# requirements are installed; without it the presets are imported from the repository.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

OUT=${1:?usage: tools/calibrate.sh OUT_DIR}
PRESETS=${PRESETS:-"qwen2.5-7b-instruct qwen2.5-3b-instruct qwen2.5-1.5b-instruct qwen2.5-0.5b-instruct"}
SEQ_LENS=${SEQ_LENS:-"2048 4096"}
WORLDS=${WORLDS:-"1 2"}
POINT_TIMEOUT=${POINT_TIMEOUT:-240}
PYTHON=${PYTHON:-python3}
EXTRA=${EXTRA:-}  # more measure_memory.py flags for every point, e.g. "--expandable-segments false"
# SIMULATE=1: a world larger than the GPUs here runs as rank 0 on one GPU (measure_memory.py --simulate-world)
SIMULATE=${SIMULATE:-0}
TAG=${TAG:-}  # appended to point names, to keep runs with other EXTRA flags apart
DEADLINE=${DEADLINE:-}  # epoch seconds after which no point starts (a bounded session); rerun to fill the gaps
GPUS=${GPUS:-$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())')}
# NVLink multicast (NVLS) stays off: it is not needed for these collectives and can wedge shared hosts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT/points" "$OUT/logs"
presets_flag=()
[ -n "${PRESETS_FILE:-}" ] && presets_flag=(--presets-file "$PRESETS_FILE")

run_point() {  # world gpus(csv) port preset seq [sim]
  local world=$1 gpus=$2 port=$3 preset=$4 seq=$5 sim=${6:-}
  local name="${preset}_s${seq}_w${world}${sim:+sim}${TAG:+_$TAG}"
  if [ -e "$OUT/points/$name.json" ]; then echo "have  $name"; return; fi
  if [ -n "$DEADLINE" ] && [ "$(date +%s)" -ge "$DEADLINE" ]; then echo "skip  $name: past DEADLINE"; return; fi
  echo "$(date +%T) start $name on GPU $gpus"
  local launch=(-m torch.distributed.run --nproc_per_node "$world" --master_port "$port" tools/measure_memory.py)
  [ -n "$sim" ] && launch=(tools/measure_memory.py --simulate-world "$world")
  # shellcheck disable=SC2086
  CUDA_VISIBLE_DEVICES=$gpus timeout -k 10 "$POINT_TIMEOUT" "$PYTHON" "${launch[@]}" \
    --preset "$preset" --seq-len "$seq" "${presets_flag[@]}" --out "$OUT/points/$name.json" $EXTRA \
    >"$OUT/logs/$name.log" 2>&1
  local rc=$?
  echo "$(date +%T) done  $name rc=$rc: $(grep -h "^$OUT/points/$name.json:" "$OUT/logs/$name.log" || echo 'no result line')"
}

for world in $WORLDS; do
  sim="" width=$world
  if [ "$world" -gt "$GPUS" ]; then
    [ "$SIMULATE" = 1 ] || { echo "skip world $world: $GPUS GPUs (SIMULATE=1 plays rank 0 on one GPU)"; continue; }
    sim=sim width=1
  fi
  slots=$((GPUS / width))
  points=()
  for preset in $PRESETS; do for seq in $SEQ_LENS; do points+=("$preset $seq"); done; done
  for ((slot = 0; slot < slots; slot++)); do
    gpus=$(seq -s, $((slot * width)) $((slot * width + width - 1)))
    (
      for ((i = slot; i < ${#points[@]}; i += slots)); do
        # shellcheck disable=SC2086
        run_point "$world" "$gpus" $((29500 + slot)) ${points[$i]} $sim
      done
    ) &
  done
  wait
done

"$PYTHON" tools/measure_memory.py collect "$OUT/points" --out "$OUT/memory_calibration.json"
echo "table: $OUT/memory_calibration.json"
