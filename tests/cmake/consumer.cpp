// SPDX-License-Identifier: Apache-2.0
// A tiny program that uses coord the way a consumer project would.
#include <coord/coord.hpp>

int main() {
    coord::memory_store store;
    coord::fenced_resource res{store, "k"};
    if (!res.write(2, "new")) return 1;
    if (res.write(1, "old").error() != coord::errc::stale_fence) return 2;
    return res.read()->value == "new" ? 0 : 3;
}
