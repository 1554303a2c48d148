#!/usr/bin/env bash
# Configures and builds kvwatch into build/ (Release with debug info, Ninja).
#   scripts/build.sh                    everything (the binary, tests, benchmarks unless
#                                       configured off: -DKVWATCH_BUILD_BENCH=OFF)
#   scripts/build.sh --target kvwatch   only the named targets
# Other arguments go to the configure step (-DKVWATCH_SANITIZE=address,undefined).
set -euo pipefail
cd "$(dirname "$0")/.."
configure=() targets=()
while (($#)); do
  if [[ "$1" == "--target" && $# -ge 2 ]]; then
    targets+=(--target "$2")
    shift 2
  else
    configure+=("$1")
    shift
  fi
done
# ccache when installed (scripts/install-deps.sh --test installs it): a rebuild of
# unchanged files, in any tree or worktree, is then a cache hit.
if command -v ccache >/dev/null; then
  configure=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache "${configure[@]}")
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${configure[@]}" >/dev/null
cmake --build build --parallel "$(nproc)" "${targets[@]}"
