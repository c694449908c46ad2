// SPDX-License-Identifier: Apache-2.0
// coord/detail/options.hpp: the checks every store's options share, written
// once: a timeout is 1 ms to 24 h (a store's operation, connect, lock and
// busy timeouts, the cron runner's grace), refused with std::invalid_argument
// naming the option.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>

namespace coord::detail {

/// Throws std::invalid_argument("<what> must be 1 ms to 24 h") unless
/// 1 ms <= d <= 24 h.
template <class Rep, class Period>
void check_timeout(const char* what, std::chrono::duration<Rep, Period> d) {
    if (d < std::chrono::milliseconds{1} || d > std::chrono::hours{24})
        throw std::invalid_argument(std::string(what) + " must be 1 ms to 24 h");
}

}  // namespace coord::detail
