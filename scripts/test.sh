#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (as root): installs the
# dependencies, builds, fuzzes the parsers for a bounded time (clang, libFuzzer),
# checks the agent's thread-safety annotations (clang), runs the threaded tests
# under ThreadSanitizer, and runs every test through CTest.
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
  --target kv_event_decoder_fuzz engine_log_parser_fuzz exposition_parser_fuzz trace_record_fuzz \
  web_config_fuzz agent_config_fuzz kvwatch_cli
ctest --test-dir build-fuzz --output-on-failure --parallel "$(nproc)" -R '_fuzz_smoke$'

# ThreadSanitizer over the agent's threaded tests: the HTTP server, the alert
# notifiers, the engine /metrics scraper and the ZeroMQ collectors (their transport
# and gap tests; the trace-sized ones are too slow under TSan). libzmq is not
# instrumented: tests/tsan.supp.
# kv_events_fleet_test (16 publishers) is left out for now: under TSan it runs past 10
# minutes (1 s plain) in TSan's race-report handling of reads of libzmq's buffers;
# kv_events_collector_test covers the same socket code under TSan.
tsan_tests=(http_server_test alert_runner_test engine_metrics_collector_test kv_events_collector_test)
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVWATCH_SANITIZE=thread \
  -DKVWATCH_BUILD_BENCH=OFF >/dev/null
# (gcc warns that TSan does not model atomic_thread_fence inside Boost.Asio: kept in the log)
cmake --build build-tsan --parallel "$(nproc)" --target "${tsan_tests[@]}" >build-tsan/build.log 2>&1 ||
  { tail -n 60 build-tsan/build.log; exit 1; }
export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1"
for t in "${tsan_tests[@]}"; do
  filter='*'
  [[ $t == kv_events_collector_test ]] && filter='KvEventsGapTest.*:KvEventsRestartTest.*:KvEventsMalformedTest.*:KvEventsTransportTest.*'
  echo "tsan: $t"
  build-tsan/tests/"$t" --gtest_filter="$filter" --gtest_brief=1
done
unset TSAN_OPTIONS

cd build
ctest --output-on-failure --parallel "$(nproc)" --timeout 1200
