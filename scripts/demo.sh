#!/usr/bin/env bash
# The main job on a built-in default, from a fresh Debian 12 machine (as root):
# installs the dependencies, builds, and replays the built-in synthetic workload
# through the curve engine, printing the capacity worksheet and writing a plot.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build/agent/kvwatch synth --requests 20000 | build/agent/kvwatch replay --model llama-3-8b --svg curve.svg -
echo "plot written to $(pwd)/curve.svg" >&2
