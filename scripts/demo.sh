#!/usr/bin/env bash
# The main job on a built-in default, from a fresh Debian 12 machine (as root):
# installs the dependencies, builds, and runs the agent on its built-in synthetic
# replica. Open http://127.0.0.1:8477/ for the live curves; Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Only what this runs: the kvwatch binary (the test command builds the rest).
scripts/build.sh --target kvwatch
exec build/agent/kvwatch agent
