#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds coord's Debian package (cpack), extracts it into a scratch root
# (nothing is installed on the machine) and builds consumers against what
# it holds: through the CMake package and through pkg-config.
set -euo pipefail
build="$1" src="$2" compiler="$3"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! (cd "$build" && cpack -G DEB -B "$work/pkg" >"$work/cpack.log" 2>&1); then
  echo "FAIL: cpack"; cat "$work/cpack.log"; exit 1
fi
deb=$(ls "$work"/pkg/libcoord-dev_*_all.deb)
[ "$(dpkg-deb -f "$deb" Package)" = libcoord-dev ] || { echo "FAIL: not libcoord-dev: $deb"; exit 1; }
root="$work/root"
dpkg-deb -x "$deb" "$root"
for f in usr/include/coord/coord.hpp usr/include/coord/rules/fence.hpp usr/share/cmake/coord/coordConfig.cmake \
         usr/share/pkgconfig/coord.pc usr/share/doc/coord/LICENSE; do
  [ -f "$root/$f" ] || { echo "FAIL: the package lacks $f"; exit 1; }
done
# CMake: find_package(coord) from the extracted root.
cat > "$work/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.21)
project(deb_consumer CXX)
find_package(coord 0.1 CONFIG REQUIRED)
add_executable(consumer consumer.cpp)
target_link_libraries(consumer PRIVATE coord::coord)
CMAKE
cp "$src/tests/cmake/consumer.cpp" "$work/consumer.cpp"
cmake -S "$work" -B "$work/b" -DCMAKE_CXX_COMPILER="$compiler" -DCMAKE_PREFIX_PATH="$root/usr" >/dev/null
cmake --build "$work/b" >/dev/null
"$work/b/consumer"
# pkg-config: the same consumer from coord.pc (relocatable: its prefix is where it lies).
flags=$(PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR="$root/usr/share/pkgconfig" pkg-config --cflags coord)
case "$flags" in *"$root/usr/share/pkgconfig/../../include"*|*"$root/usr/include"*) ;; *) echo "FAIL: coord.pc gives '$flags'"; exit 1 ;; esac
"$compiler" -std=c++20 $flags "$work/consumer.cpp" -o "$work/pc_consumer" -pthread
"$work/pc_consumer"
echo "deb consumer: the package builds consumers through CMake and pkg-config"
