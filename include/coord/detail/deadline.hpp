// SPDX-License-Identifier: Apache-2.0
// coord/detail/deadline.hpp: the deadline every engine call runs under, the
// one wait on a socket that honours it, and the check of an idle one. Shared by every engine's
// connection layer, so that a paused or black-holed server gives an answer
// in bounded time the same way everywhere.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdint>

namespace coord::detail {

using deadline_clock = std::chrono::steady_clock;
using deadline = deadline_clock::time_point;

/// Now plus `d`, saturated at the clock's end (a huge timeout means "never").
inline deadline deadline_after(std::chrono::nanoseconds d) noexcept {
    const auto now = deadline_clock::now();
    if (d <= std::chrono::nanoseconds::zero()) return now;
    if (d >= deadline::max() - now) return deadline::max();
    return now + std::chrono::duration_cast<deadline_clock::duration>(d);
}

/// What a wait on a socket came to.
enum class wait_result { ready, timed_out, failed };

/// Waits until `fd` is ready for `events` (POLLIN, POLLOUT) or `until`
/// passes; an interrupted poll is resumed with the time that is left.
/// `failed` leaves errno set.
inline wait_result wait_fd(int fd, short events, deadline until) noexcept {
    for (;;) {
        int ms = -1;
        if (until != deadline::max()) {
            const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - deadline_clock::now()).count();
            if (left <= 0) return wait_result::timed_out;
            ms = left > 1'000'000'000 ? 1'000'000'000 : static_cast<int>(left);
        }
        pollfd p{fd, events, 0};
        const int n = ::poll(&p, 1, ms);
        if (n > 0) return wait_result::ready;  // also POLLERR / POLLHUP: the next read says what happened
        if (n == 0) continue;                  // re-check the deadline (poll rounds)
        if (errno == EINTR) continue;
        return wait_result::failed;
    }
}

/// What one peek at an idle connection's socket finds, without waiting: a
/// pooled connection is checked so before a call is sent on it, and one the
/// server closed is opened again (the call, never sent, is not an unknown
/// outcome). Bytes waiting on an idle connection are the engine's to read
/// (a notification, a TLS record, a last error before the close).
enum class idle_socket { quiet, bytes_waiting, closed };
/// A connection a call took less than this ago is not peeked at (the peek
/// is a system call, about 2 us here, 4% of a Redis call at loopback): a
/// server that died in that instant makes the next call on it
/// outcome_unknown, as it does a call in flight.
inline constexpr std::chrono::milliseconds idle_check_after{1};
inline idle_socket peek_idle(int fd) noexcept {
    char b;
    const ssize_t n = ::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return idle_socket::bytes_waiting;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return idle_socket::quiet;
    return idle_socket::closed;
}

}  // namespace coord::detail
