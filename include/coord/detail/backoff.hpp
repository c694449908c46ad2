// SPDX-License-Identifier: Apache-2.0
// coord/detail/backoff.hpp: the compare-and-set retry of the ZooKeeper and
// etcd engines, written once: the tries, and the pause between two tries of
// a compare-and-set that lost to another writer.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>

#include "coord/error.hpp"

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

/// How many times the engines try one compare-and-set before they give up
/// with their errc::contention.
inline constexpr int conflict_tries = 64;

/// Runs `try_once(attempt)` (attempt 0, 1, ...) up to `tries` times, with
/// conflict_backoff before every try but the first. try_once returns
/// std::optional of the call's result: the result when the call is decided
/// (done, refused or failed), std::nullopt when its compare-and-set lost to
/// another writer and it should read and try again. Returns the first
/// decided result, or std::nullopt when every try lost (the caller reports
/// its engine's errc::contention: conflicts_in_a_row).
template <class Try>
auto retry_conflicts(int tries, Try&& try_once) -> decltype(try_once(0)) {
    for (int attempt = 0; attempt < tries; ++attempt) {
        if (attempt > 0) conflict_backoff(attempt);
        if (auto r = try_once(attempt)) return r;
    }
    return std::nullopt;
}

/// The error of a compare-and-set that lost every try: `contention` is the
/// engine's errc::contention, `what` the call ("segment allocate").
inline error conflicts_in_a_row(std::error_code contention, std::string_view what, int tries) {
    return error(contention, std::string(what) + ": " + std::to_string(tries) + " conflicts in a row");
}

}  // namespace coord::detail
