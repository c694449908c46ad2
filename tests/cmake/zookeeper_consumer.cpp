// SPDX-License-Identifier: Apache-2.0
// A tiny program that links coord::zookeeper (libzookeeper_mt) as a consumer
// would. It needs no server: an unreachable one must be a clear store_error.
#include <coord/lease.hpp>
#include <coord/zookeeper/store.hpp>

#include <chrono>

int main() {
    static_assert(coord::lease_store<coord::zookeeper::store>);
    coord::zookeeper::options o;
    o.connect_timeout = std::chrono::milliseconds{300};
    try {
        coord::zookeeper::store store{"zookeeper://127.0.0.1:1", {}, o};
        return 1;
    } catch (const coord::store_error& e) {
        return e.code() == coord::zookeeper::errc::connection_failed ? 0 : 2;
    }
}
