// SPDX-License-Identifier: Apache-2.0
// A tiny program that links coord::sqlite (libsqlite3) as a consumer would:
// a lease and a fenced write in a database under the system temp dir.
#include <coord/fence.hpp>
#include <coord/lease.hpp>
#include <coord/sqlite/store.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <unistd.h>

int main() {
    const auto path = std::filesystem::temp_directory_path() / ("coord-consumer-" + std::to_string(::getpid()) + ".db");
    int rc = 0;
    {
        coord::sqlite::store store{path};
        coord::basic_lease_manager leases{store};
        coord::basic_keyed_fenced_resource res{store};
        auto l = leases.acquire("job", "me", std::chrono::seconds{5});
        if (!l || !res.write("k", l->token, "v") || res.write("k", l->token - 1, "old")) rc = 1;
    }
    for (const char* suffix : {"", "-wal", "-shm", "-coord"}) std::filesystem::remove(path.string() + suffix);
    return rc;
}
