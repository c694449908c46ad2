// SPDX-License-Identifier: Apache-2.0
// A tiny program that links coord::redis (hiredis) as a consumer would. It
// needs no server: an unreachable one must be a clear store_error.
#include <coord/lease.hpp>
#include <coord/redis/store.hpp>

int main() {
    static_assert(coord::lease_store<coord::redis::store>);
    try {
        coord::redis::store store{"redis://127.0.0.1:1"};
        return 1;
    } catch (const coord::store_error& e) {
        return e.code() == coord::redis::errc::connection_failed ? 0 : 2;
    }
}
