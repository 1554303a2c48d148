#!/usr/bin/env bash
# The README's eviction-policy comparison on the real traces in ../shared/data:
# every policy at three capacities per trace (about the 50%, 80% and 95% page-hit
# working sets of the LRU curve), and vllm against the LRU curve at three decode
# rates. Prints kvwatch replay's policy tables. Needs build/agent/kvwatch.
#   bash bench/policy_comparison.sh [DATA_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-../shared/data}
kvwatch=build/agent/kvwatch
priorities="class:turn2=1,class:turn3-4=2,class:turn5-8=3,class:turn9+=4"
run() {  # trace capacities [extra options...]
  local trace=$1 caps=$2
  shift 2
  echo "== $(basename "$trace") at $caps pages $*"
  "$kvwatch" replay --page-tokens 512 --progress never --no-tenants --capacities "$caps" \
    --priority "$priorities" "$@" "$trace" | sed -n '/^eviction policies/,$p'
}
for spec in "mooncake/conversation_trace.jsonl 8000,20000,37000" \
            "mooncake/synthetic_trace.jsonl 6000,15000,25000" \
            "mooncake/toolagent_trace_hash_ids.jsonl 8000,16000,24000" \
            "weka/claude_code_sessions_merged.jsonl.gz 14000,36000,75000"; do
  read -r trace caps <<<"$spec"
  [[ -e "$data/$trace" ]] || { echo "skip: $data/$trace is absent"; continue; }
  run "$data/$trace" "$caps" --policy all
  for rate in 10 200; do
    run "$data/$trace" "$caps" --policy lru,vllm --decode-tokens-per-second "$rate"
  done
done
