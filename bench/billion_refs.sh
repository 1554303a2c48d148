#!/usr/bin/env bash
# A synthetic stream of about 1 billion page references (kvwatch synth, generated
# on the fly and piped, never stored) through `kvwatch replay --sample-rate 0.001`:
# wall time and peak memory; and the sampled curve's error against the exact one
# on the first 100 million references (both replays over the same stream).
#   bash bench/billion_refs.sh [REQUESTS]   (default 11,700,000 requests: about 1e9 references)
set -euo pipefail
cd "$(dirname "$0")/.."
kvwatch=build/agent/kvwatch
big=${1:-11700000}
small=$((big / 10))
caps=100,300,1000,3000,10000,30000,100000
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== error: exact vs --sample-rate 0.001 on the first $small requests"
for mode in exact sampled; do
  extra=()
  [[ $mode == sampled ]] && extra=(--sample-rate 0.001)
  /usr/bin/time -f "$mode: %e s wall, %M KB peak" \
    bash -c "$kvwatch synth --duration 0 --requests $small -o - | $kvwatch replay --format json --progress never --capacities $caps ${extra[*]} -" \
    >"$tmp/$mode.json"
done
python3 - "$tmp/exact.json" "$tmp/sampled.json" <<'PY'
import json, sys
e, s = (json.load(open(p)) for p in sys.argv[1:3])
print(f"page refs {e['page_refs']:,} (sampled estimate {s['page_refs']:,.0f}), distinct pages {e['distinct_pages']:,}")
worst = 0
for pe, ps in zip(e["points"], s["points"]):
    d = abs(pe["page_hit_ratio"] - ps["page_hit_ratio"])
    worst = max(worst, d)
    print(f"  {pe['capacity_pages']:>10,} pages: exact {pe['page_hit_ratio']:.4f}, sampled {ps['page_hit_ratio']:.4f}, |error| {d:.4f}")
print(f"max |error| of page hit ratio: {worst:.4f}")
PY
echo "== $big requests through --sample-rate 0.001"
/usr/bin/time -f "sampled: %e s wall, %M KB peak" \
  bash -c "$kvwatch synth --duration 0 --requests $big -o - | $kvwatch replay --format json --progress never --capacities $caps --sample-rate 0.001 -" \
  >"$tmp/big.json"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(f\"page refs {d['page_refs']:,.0f}, requests {d['requests']:,}\")" "$tmp/big.json"
