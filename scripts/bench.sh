#!/usr/bin/env bash
# Builds and runs the benchmarks (bench/*_bench.cc, Google Benchmark) in build/.
# They are not part of scripts/test.sh: they measure, they do not check, and with
# fixed iteration counts over the shared real traces they take minutes; the test
# command does not build what it does not run.
#   scripts/bench.sh                       every benchmark
#   scripts/bench.sh policy_bench [ARGS]   one, with its own arguments
#                                          (e.g. --benchmark_filter=Lru)
set -euo pipefail
cd "$(dirname "$0")/.."
benches=()
for src in bench/*_bench.cc; do
  name=$(basename "$src" .cc)
  benches+=("$name")
done
if (($#)); then
  [[ " ${benches[*]} " == *" $1 "* ]] || { echo "bench.sh: no benchmark '$1' (${benches[*]})" >&2; exit 1; }
  benches=("$1")
  shift
fi
targets=()
for b in "${benches[@]}"; do targets+=(--target "$b"); done
scripts/build.sh -DKVWATCH_BUILD_BENCH=ON "${targets[@]}"
for b in "${benches[@]}"; do
  echo "== $b"
  build/bench/"$b" "$@"
done
