#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (as root): installs the
# dependencies, builds, fuzzes the parsers for a bounded time (clang, libFuzzer),
# and runs every test through CTest.
#   KVWATCH_LONG=1 scripts/test.sh   soak, fuzz and large-trace tests at full size
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
scripts/build.sh

# Fuzz smoke and the thread-safety analysis: each libFuzzer target from its seed corpus, 20 s (10 min when long).
fuzz_seconds=20
[[ "${KVWATCH_LONG:-}" == 1 ]] && fuzz_seconds=600
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKVWATCH_FUZZ=ON -DKVWATCH_FUZZ_SECONDS="$fuzz_seconds" -DKVWATCH_BUILD_BENCH=OFF >/dev/null
# The same clang tree checks the thread-safety annotations (base/thread_annotations.h)
# of the agent as errors (-Werror=thread-safety, CMakeLists.txt).
cmake --build build-fuzz --parallel "$(nproc)" \
  --target kv_event_decoder_fuzz engine_log_parser_fuzz exposition_parser_fuzz kvwatch_app
ctest --test-dir build-fuzz --output-on-failure --parallel "$(nproc)" -R '_fuzz_smoke$'

cd build
ctest --output-on-failure --parallel "$(nproc)" --timeout 1200
