// SPDX-License-Identifier: Apache-2.0
// tests/zookeeper/zk_support.hpp: the ZooKeeper servers the tests use
// (started by the ctest fixtures, tests/zookeeper/zookeeper.sh: a standalone server and
// an ensemble of three; their URLs in COORD_ZK_URL and COORD_ZK_ENSEMBLE_URL)
// and the factory the conformance suites run on (a fresh root each). A
// missing server fails the test.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "coord/zookeeper/store.hpp"
#include "support/test_support.hpp"

namespace coord::test {

inline std::string zk_env(const char* name, const char* fixture) {
    const char* u = std::getenv(name);
    if (!u || !*u) throw std::runtime_error(std::string(name) + " is not set: run through ctest (fixture " + fixture + ")");
    return u;
}
inline std::string zk_url() { return zk_env("COORD_ZK_URL", "ZooKeeper.start"); }
inline std::string zk_ensemble_url() { return zk_env("COORD_ZK_ENSEMBLE_URL", "ZooKeeperEnsemble.start"); }


/// A store opened once the ensemble gives a session: a test that starts
/// right after another restarted servers may find the ensemble still
/// electing (seen under TSan: no session within the 5 s connect timeout).
/// Opening is what is retried, never a call the test checks.
template <class Store = zookeeper::store, class... Args>
std::unique_ptr<Store> zk_open_when_up(const std::string& url, Args&&... args) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    for (;;) {
        try {
            return std::make_unique<Store>(url, args...);
        } catch (const std::exception&) {
            if (std::chrono::steady_clock::now() >= end) throw;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds{250});
    }
}

/// `base` with a root node no other test uses, initialized as a root that
/// never served coord (zero floors).
inline std::string zk_fresh_root(const std::string& base) {
    const std::string url = base + "/" + unique_name();
    auto s = zk_open_when_up(url);
    if (!s->initialize(initial_floors{})) throw std::runtime_error("cannot initialize the test ZooKeeper root " + url);
    return url;
}

struct zk_factory {
    using store_type = zookeeper::basic_store<manual_clock>;
    static constexpr const char* name = "zookeeper";
    /// Tokens are zxids: one counter for the whole ensemble.
    static constexpr bool tokens_floored_by_time = false;
    std::string url = zk_fresh_root(zk_url());
    std::unique_ptr<store_type> make(manual_clock clock) { return std::make_unique<store_type>(url, clock); }
    std::unique_ptr<store_type> second;
    store_type* reopen(store_type*, manual_clock clock) {
        second = std::make_unique<store_type>(url, clock);
        return second.get();
    }
};

}  // namespace coord::test
