// SPDX-License-Identifier: Apache-2.0
// tests/etcd/etcd_support.hpp: the etcd servers the tests use (started by the
// ctest fixtures, tests/etcd/etcd.sh: one member, and a cluster of three; their
// URLs in COORD_ETCD_URL and COORD_ETCD_CLUSTER_URL) and the factory the
// conformance suites run on (a fresh key prefix each). A missing server fails
// the test.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>

#include "coord/etcd/store.hpp"
#include "support/test_support.hpp"

namespace coord::test {

inline std::string env_or_throw(const char* name, const char* fixture) {
    const char* u = std::getenv(name);
    if (!u || !*u) throw std::runtime_error(std::string(name) + " is not set: run through ctest (fixture " + fixture + ")");
    return u;
}
inline std::string etcd_url() { return env_or_throw("COORD_ETCD_URL", "Etcd.start"); }
inline std::string etcd_cluster_url() { return env_or_throw("COORD_ETCD_CLUSTER_URL", "EtcdCluster.start"); }

/// A key prefix no other test uses.
inline std::string etcd_fresh_prefix() { return unique_name(); }
inline etcd::options etcd_options(std::string prefix) {
    etcd::options o;
    o.prefix = std::move(prefix);
    return o;
}

/// The store initialized as one that never served coord (zero floors);
/// already initialized (another store object on the same prefix) is fine.
template <class Store>
Store& etcd_init(Store& s) {
    auto r = s.initialize(etcd::initial_floors{});
    if (!r && r.error() != errc::store_already_initialized) ADD_FAILURE() << "etcd store init: " << r.error().message();
    return s;
}

struct etcd_factory {
    using store_type = etcd::basic_store<manual_clock>;
    static constexpr const char* name = "etcd";
    /// Tokens are etcd's revision: one counter for the whole cluster.
    static constexpr bool tokens_floored_by_time = false;
    std::string prefix = etcd_fresh_prefix();
    std::unique_ptr<store_type> make(manual_clock clock) {
        auto s = std::make_unique<store_type>(etcd_url(), clock, etcd_options(prefix));
        etcd_init(*s);
        return s;
    }
    std::unique_ptr<store_type> second;
    store_type* reopen(store_type*, manual_clock clock) {
        second = std::make_unique<store_type>(etcd_url(), clock, etcd_options(prefix));
        return second.get();
    }
};

}  // namespace coord::test
