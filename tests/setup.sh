#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages coord's build, tests and benchmarks need, when
# they are missing (a no-op on a machine that has them). Needs root to install.
set -euo pipefail
# shellcheck source=tests/apt_install.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt_install.sh"

packages=(cmake ninja-build g++ clang-14 libclang-rt-14-dev libgtest-dev libbenchmark-dev libhowardhinnant-date-dev tzdata
          libssl-dev nlohmann-json3-dev rapidjson-dev libjwt-dev libcpp-jwt-dev pkg-config libpq-dev libsqlite3-dev libhiredis-dev libcurl4-openssl-dev libzookeeper-mt-dev faketime iptables libmicrohttpd-dev mkdocs doxygen)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "tests/setup.sh: missing packages (${missing[*]}); run as root or install them" >&2
  exit 1
fi
echo "tests/setup.sh: installing ${missing[*]}" >&2
apt_install "${missing[@]}"
