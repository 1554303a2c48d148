#!/usr/bin/env bash
# The test suite, from a fresh Debian 12 machine (as root): installs the
# dependencies, builds, runs every test through CTest and checks the thread-safety
# annotations with clang. docs/development.md describes the stages and what each
# costs. Two modes:
#   scripts/test.sh          what every change must pass, in under 10 minutes from a
#                            fresh clone on 2 cores (CI runs this: .ci/run)
#   scripts/test.sh --full   also the sanitizer and fuzzing stages: the libFuzzer
#                            targets for a bounded time and the threaded tests under
#                            ThreadSanitizer (another whole clang build: about 6 more
#                            minutes on 2 cores). Run it for a change to the parsers,
#                            the HTTP server, the notifiers, the scraper or the ZeroMQ
#                            collector's threads, and before a release.
#   KVWATCH_LONG=1 scripts/test.sh --full   soak, fuzz and large-trace tests at full size
#
# Build trees:
#   build/        g++, RelWithDebInfo: the binary and the eight test executables (one
#                 per tests/<folder>), run by ctest. The benchmarks are not built here
#                 (nothing here runs them): scripts/bench.sh builds and runs them.
#   build-clang/  (default mode) clang++ at -O0 without debug information, the kvwatch
#                 binary only: clang checks the thread-safety annotations
#                 (base/thread_annotations.h) of everything it compiles as errors
#                 (-Werror=thread-safety, CMakeLists.txt); the build is the check.
#   build-tsan/   (--full) clang++ with -fsanitize=thread: the same analysis, and it
#                 builds the kvwatch binary, only the test files in tsan_files below,
#                 and the libFuzzer targets: the parsers' targets need ASan, which
#                 cannot share TSan's instrumentation, so tests/fuzz compiles those few
#                 parser sources again with its own flags; the two targets that span
#                 the agent (a whole config through check-config, the state file
#                 through its loader) run libFuzzer with TSan and link this tree's
#                 libraries (tests/fuzz/CMakeLists.txt), not a third copy. -O0 with
#                 line tables: enough for TSan's reports, and about 40% less compile
#                 time than -O1; the fuzz targets' own sources stay at -O1.
# The stages print "stage <name>: N s wall, M s CPU" so a slow run shows where its
# time went (CPU seconds of the stage's own commands, not of anything beside them).
set -euo pipefail
cd "$(dirname "$0")/.."
full=0
case "${1:-}" in
  --full) full=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--full]" >&2; exit 2 ;;
esac
jobs=$(nproc)
# CPU seconds used by this shell's finished children (fields 16 and 17 of
# /proc/self/stat: cutime and cstime, in clock ticks).
children_cpu() {
  local stat
  read -r stat </proc/$$/stat
  stat=${stat##*) }  # past "pid (comm) "
  read -ra f <<<"$stat"
  echo $(( (f[13] + f[14]) / $(getconf CLK_TCK) ))
}
stage_start=$SECONDS
stage_cpu=$(children_cpu)
stage_done() {
  local cpu
  cpu=$(children_cpu)
  echo "stage $1: $((SECONDS - stage_start)) s wall, $((cpu - stage_cpu)) s CPU"
  stage_start=$SECONDS
  stage_cpu=$cpu
}
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

scripts/install-deps.sh --test
stage_done install-deps

# The format (.clang-format): every C++ file as clang-format writes it; a file that
# differs is named with the lines that would change. Fix: clang-format -i FILE.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z '*.cc' '*.h'
else
  find agent alerts base bench collectors config curve sim tests -name '*.cc' -print0 -o -name '*.h' -print0
fi | xargs -0 clang-format --dry-run --Werror
stage_done "format check"

scripts/build.sh -DKVWATCH_BUILD_BENCH=OFF
stage_done "gcc build (build/)"

# The clang tree builds while build/'s tests run, at the lowest priority: most of
# those tests wait (on the agent, Prometheus, Alertmanager, Chromium, timers), and the
# build takes only the CPU they leave idle.
clang_tree=build-clang
clang_targets=(--target kvwatch)
if ((full)); then
  clang_tree=build-tsan
  clang_targets=()
  # Fuzz smoke: each libFuzzer target from its seed corpus, 5 s (10 min when long).
  fuzz_seconds=5
  [[ "${KVWATCH_LONG:-}" == 1 ]] && fuzz_seconds=600
  # ThreadSanitizer over the agent's threaded tests: the HTTP server, the alert
  # notifiers, the engine /metrics scraper and the ZeroMQ collectors (their transport
  # and gap tests; the trace-sized ones are too slow under TSan). libzmq is not
  # instrumented: tests/tsan.supp.
  # kv_events_fleet_test (16 publishers) is left out for now: under TSan it runs past 10
  # minutes (1 s plain) in TSan's race-report handling of reads of libzmq's buffers;
  # kv_events_collector_test covers the same socket code under TSan.
  # Each entry: a test file, optionally ":" and the suites of it to run (default: all
  # the suites the file defines, read from its TEST lines).
  # http_abuse_test: its TLS load tests skip themselves under TSan (handshakes slow
  # past their bounds); the plain ones and the keep-alive run.
  tsan_files=(agent/web/http_server_test.cc agent/web/http_abuse_test.cc agent/runtime/alert_runner_test.cc
    collectors/engine_metrics_collector_test.cc
    collectors/kv_events_collector_test.cc:KvEventsGapTest,KvEventsRestartTest,KvEventsMalformedTest,KvEventsTransportTest,KvEventsRestoreTest,KvEventsTimestampTest)
  tsan_paths=()
  for entry in "${tsan_files[@]}"; do tsan_paths+=("${entry%%:*}"); done
  # build-tsan/ was a g++ tree before the clang one; a tree configured for another
  # compiler cannot be reconfigured in place.
  if [[ -f build-tsan/CMakeCache.txt ]] && ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang' build-tsan/CMakeCache.txt; then
    rm -rf build-tsan
  fi
  CC=clang CXX=clang++ cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -gline-tables-only -DNDEBUG" "${launcher[@]}" \
    -DKVWATCH_TEST_COMPILE_FLAGS="-O0;-gline-tables-only" -DKVWATCH_TEST_COMPILE_FLAGS_agent="" \
    -DKVWATCH_SANITIZE=thread -DKVWATCH_BUILD_BENCH=OFF \
    -DKVWATCH_TEST_FILES="$(IFS=';'; echo "${tsan_paths[*]}")" \
    -DKVWATCH_FUZZ=ON -DKVWATCH_FUZZ_SECONDS="$fuzz_seconds" >/dev/null
else
  # The analysis alone: no sanitizer, no tests, no debug information.
  CC=clang CXX=clang++ cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -DNDEBUG" "${launcher[@]}" \
    -DKVWATCH_BUILD_TESTS=OFF -DKVWATCH_BUILD_BENCH=OFF >/dev/null
fi
(nice -n 19 cmake --build "$clang_tree" --parallel "$jobs" "${clang_targets[@]}" >"$clang_tree/build.log" 2>&1) &
clang_build=$!
trap 'kill "$clang_build" 2>/dev/null || true' EXIT

# Every test, one CTest test per TEST(); the summary line ("100% tests passed, 0 tests
# failed out of N") is what CI counts. Two more slots than cores: the real-time
# end-to-end tests (TenantsEndToEndTest, AlertmanagerEndToEndTest, the crash tests)
# mostly wait on Prometheus, Alertmanager and the agents they restart, and with only
# nproc slots they hold both cores' slots for a minute.
ctest_status=0
ctest --test-dir build --output-on-failure --parallel "$((jobs + 2))" --timeout 1200 || ctest_status=$?
stage_done "ctest (build/; the clang tree building beside it at nice 19)"
clang_status=0
wait "$clang_build" || clang_status=$?
trap - EXIT
stage_done "clang build, its rest ($clang_tree/: thread-safety analysis$( ((full)) && echo ', TSan tests, fuzzers'))"
if ((clang_status != 0)); then
  tail -n 60 "$clang_tree/build.log"
  echo "test.sh: the clang build ($clang_tree/) failed" >&2
fi
if ((ctest_status != 0 || clang_status != 0)); then exit 1; fi
((full)) || exit 0

ctest --test-dir build-tsan --output-on-failure --parallel "$jobs" -R '_fuzz_smoke$'
stage_done "fuzz smoke"

export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1"
for entry in "${tsan_files[@]}"; do
  file=${entry%%:*}
  if [[ $entry == *:* ]]; then
    suites=${entry#*:}
    suites=${suites//,/ }
  else
    suites=$(sed -nE 's/^\s*(TEST|TEST_F|TEST_P|TYPED_TEST)\(\s*([A-Za-z0-9_]+)\s*,.*/\2/p' "tests/$file" | sort -u)
  fi
  filter=$(for s in $suites; do printf '%s.*:' "$s"; done)
  filter=${filter%:}
  [[ -n $filter ]] || { echo "tsan: no TEST suites found in tests/$file" >&2; exit 1; }
  folder=${file%%/*}
  echo "tsan: $file ($filter)"
  # The folder's executable; in build-tsan it holds only the tsan_files of that folder.
  build-tsan/tests/"${folder}_tests" --gtest_filter="$filter" --gtest_brief=1
done
unset TSAN_OPTIONS
stage_done "tsan run"
