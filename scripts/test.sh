#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (as root): installs the
# dependencies, builds, and runs every test through CTest.
#   KVWATCH_LONG=1 scripts/test.sh   soak, fuzz and large-trace tests at full size
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
scripts/build.sh
cd build
ctest --output-on-failure --parallel "$(nproc)" --timeout 1200
