// SPDX-License-Identifier: Apache-2.0
// coord/detail/lease_poll.hpp: how a store without notifications across
// processes (the file store, SQLite) waits for its turn in line: it polls, the
// first in line often, the others seldom. Shared so that both cost the same.
//
// Cost: the first waiter in line reads the store every 2 ms (a release
// reaches it within about 2 ms); the second every 10 ms; the n-th every
// 50 ms x (n - 2), at most 500 ms, never past `until` (the manager's renewal
// of the place). With 100 waiters that is about 500 + 100 + 200 reads a
// second on the machine, independent of how often the lease changes hands.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <optional>
#include <thread>

namespace coord::detail {

inline std::chrono::milliseconds lease_poll_interval(std::size_t ahead) {
    using std::chrono::milliseconds;
    if (ahead == 0) return milliseconds{2};
    if (ahead == 1) return milliseconds{10};
    return std::min(milliseconds{500}, milliseconds{50} * static_cast<long>(ahead - 1));
}

inline void lease_poll_wait(std::size_t ahead, std::chrono::steady_clock::time_point until) {
    const auto wake = std::min(until, std::chrono::steady_clock::now() + lease_poll_interval(ahead));
    std::this_thread::sleep_until(wake);
}

/// A notified store's wait without its listener (none came free, or the
/// server is unreachable): drops it, so that the next wait listens again,
/// and waits as a polled store does rather than ask again at once.
template <class Listener>
void lease_wait_unlistened(std::optional<Listener>& listener, std::size_t ahead,
                           std::chrono::steady_clock::time_point until) {
    listener.reset();
    lease_poll_wait(ahead, until);
}

/// A notified store's observer (lease_watch_store) without its listener:
/// drops it, so that the next wait listens again, and sleeps to `until` (the
/// caller's bound is its poll); false: read again, no notification came.
template <class Listener>
bool lease_watch_unlistened(std::optional<Listener>& listener, std::chrono::steady_clock::time_point until) {
    listener.reset();
    std::this_thread::sleep_until(until);
    return false;
}

/// lease_queue_store::lease_waiting of a store that polls: nothing is kept
/// between two waits.
struct polled_waiting {
    void wait(std::size_t ahead, std::chrono::steady_clock::time_point until) const { lease_poll_wait(ahead, until); }
};

}  // namespace coord::detail
