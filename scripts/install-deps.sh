#!/usr/bin/env bash
# Installs what kvwatch needs from Debian 12's archive (run as root). Idempotent:
# when every package is already installed it changes nothing and needs no network.
#   scripts/install-deps.sh          build and run
#   scripts/install-deps.sh --test   also what the test suite uses
set -euo pipefail

packages=(g++ cmake ninja-build pkg-config libssl-dev
  prometheus-cpp-dev libcpp-httplib-dev libsimdjson-dev libboost-dev
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libyaml-cpp-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev)
if [[ "${1:-}" == "--test" ]]; then
  # clang: libFuzzer targets; prometheus (with promtool) and prometheus-alertmanager:
  # the end-to-end tests run the real ones on 127.0.0.1; chromium: the page test;
  # openssl: test certificates; ccache: rebuilds of unchanged files are cache hits
  # (the build scripts use it when installed); clang-format: the format check
  # (.clang-format).
  packages+=(clang clang-format prometheus prometheus-alertmanager chromium openssl ccache)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: run as root (apt-get install ${missing[*]})" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
