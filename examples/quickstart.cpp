// SPDX-License-Identifier: Apache-2.0
// The README's quick start: a lease on a store opened from a URL, a write
// with its fence token, and what to do with a refused or an unknown outcome.
//   quickstart [URL]   (default: file:/tmp/coord-quickstart.state)
#include <coord/coord.hpp>
#include <coord/open.hpp>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
    using namespace std::chrono_literals;
    const std::string url = argc > 1 ? argv[1] : "file:/tmp/coord-quickstart.state";
    return coord::with_store(url, [](auto& store) {
        coord::basic_lease_manager leases{store};
        coord::basic_fenced_resource orders{store, "orders"};
        auto lease = leases.acquire("orders-writer", coord::unique_owner(), 10s);
        if (!lease) {
            std::printf("not the holder: %s\n", lease.error().code.message().c_str());
            return 1;
        }
        // ... a long pause here: the lease ends, another process takes it ...
        auto w = orders.write(lease->token, "order 42 shipped");
        if (!w && w.error() == coord::errc::stale_fence) {
            std::printf("a newer holder wrote: stop\n");  // never retry with this token
            return 1;
        }
        if (!w && w.error() == coord::condition::outcome_unknown) {
            std::printf("maybe written: read it back before writing again\n");
        } else if (!w) {
            std::printf("not written: %s\n", w.error().code.message().c_str());  // nothing applied
            return 1;
        } else {
            std::printf("written with token %llu\n", static_cast<unsigned long long>(lease->token));
        }
        (void)leases.release(*lease);
        return 0;
    });
}
