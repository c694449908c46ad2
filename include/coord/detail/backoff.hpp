// SPDX-License-Identifier: Apache-2.0
// coord/detail/backoff.hpp: the pause between two tries of a compare-and-set
// that lost to another writer (the ZooKeeper and etcd engines' retry loops).
#pragma once

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

namespace coord::detail {

/// Before try number `attempt` (1, 2, ...) of a compare-and-set whose
/// previous try lost: a random pause of 100 us up to 100 us * 2^min(attempt-1, 5)
/// (3.2 ms at most; 64 tries wait about 0.2 s at most in all). Without it,
/// writers that collided retry in step, and one whose round trip is slower
/// than the others' loses every round while they keep winning (64 conflicts
/// in a row under four threads on one counter).
inline void conflict_backoff(int attempt) {
    thread_local std::minstd_rand rng{std::random_device{}()};
    const unsigned units = 1u << std::min(std::max(attempt - 1, 0), 5);
    std::this_thread::sleep_for(std::chrono::microseconds(100 * (1 + rng() % units)));
}

}  // namespace coord::detail
