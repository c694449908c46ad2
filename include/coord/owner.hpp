// SPDX-License-Identifier: Apache-2.0
// coord/owner.hpp: an owner string that no other process instance has, for
// leases, ledger workers and cron runners.
//
// A lease's renew and release act for an owner: two processes that give the
// same owner string (a copy-pasted configuration, two containers with one
// hostname, a restarted process reusing its predecessor's name) can renew
// and release each other's grants. unique_owner() names this process
// instance: the host, the process id and 64 random bits, so that neither a
// second host nor a restarted process on this one (a reused pid) ever gives
// the same string.
//
//   const std::string me = coord::unique_owner();   // "web-1:4121:9f1c2d0e5a6b7c8d"
//   auto l = leases.acquire("orders-writer", me, std::chrono::seconds{10});
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "coord/random.hpp"

namespace coord {

namespace detail {
/// 64 bits from the kernel's CSPRNG (getrandom). Throws std::system_error
/// when the kernel gives none.
inline std::uint64_t kernel_random_u64() {
    std::uint64_t r = 0;
    os_entropy(&r, sizeof r);
    return r;
}
}  // namespace detail

/// "HOST:PID:RANDOM" (RANDOM: 16 hex digits from the kernel's CSPRNG), or
/// "PREFIX:PID:RANDOM" when `prefix` is given (an application's own name for
/// the instance). Every call gives a new string: call it once per process
/// instance (or per holder) and keep it. Throws std::system_error when the
/// kernel gives no randomness.
inline std::string unique_owner(std::string_view prefix = {}) {
    std::string out;
    if (prefix.empty()) {
        char host[256] = {};
        if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') out = "host";
        else out = host;
    } else {
        out = prefix;
    }
    const std::uint64_t r = detail::kernel_random_u64();
    char tail[48];
    std::snprintf(tail, sizeof tail, ":%ld:%016llx", static_cast<long>(::getpid()), static_cast<unsigned long long>(r));
    return out + tail;
}

}  // namespace coord
