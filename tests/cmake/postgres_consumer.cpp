// SPDX-License-Identifier: Apache-2.0
// A tiny program that links coord::postgres (libpq) as a consumer would. It
// needs no server: an unreachable one must be a clear store_error.
#include <coord/postgres/store.hpp>

int main() {
    try {
        coord::postgres::store store{"host=127.0.0.1 port=1 dbname=none connect_timeout=1"};
        return 1;
    } catch (const coord::store_error& e) {
        return e.code() == coord::postgres::errc::connection_failed ? 0 : 2;
    }
}
