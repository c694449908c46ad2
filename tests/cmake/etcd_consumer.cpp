// SPDX-License-Identifier: Apache-2.0
// A tiny program that links coord::etcd (libcurl) as a consumer would. It
// needs no server: an unreachable one must be a clear store_error.
#include <coord/etcd/store.hpp>
#include <coord/lease.hpp>

int main() {
    static_assert(coord::lease_store<coord::etcd::store>);
    try {
        coord::etcd::store store{"etcd://127.0.0.1:1"};
        return 1;
    } catch (const coord::store_error& e) {
        return e.code() == coord::etcd::errc::connection_failed ? 0 : 2;
    }
}
