// SPDX-License-Identifier: Apache-2.0
// tests/support/test_support.hpp: helpers shared by coord's tests: a
// scratch directory, and the store factories the conformance suites run on.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>

#include "coord/clock.hpp"
#include "coord/storage/file.hpp"
#include "coord/storage/memory.hpp"

namespace coord::test {

/// A fresh directory under the system temp dir, removed with its contents.
class scratch_dir {
public:
    scratch_dir() {
        static std::atomic<int> counter{0};
        std::random_device rd;
        path_ = std::filesystem::temp_directory_path() /
                ("coord-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
                 std::to_string(rd()));
        std::filesystem::create_directories(path_);
    }
    ~scratch_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    scratch_dir(const scratch_dir&) = delete;
    scratch_dir& operator=(const scratch_dir&) = delete;
    const std::filesystem::path& path() const noexcept { return path_; }
    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

private:
    std::filesystem::path path_;
};

/// A port on 127.0.0.1 that takes connections (the kernel's backlog) and
/// never answers: a server that hangs, for the tests of bounded waits.
class silent_port {
public:
    silent_port() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof addr;
        if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 16) != 0 ||
            ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
            throw std::runtime_error("silent_port: no listening socket on 127.0.0.1");
        port_ = ntohs(addr.sin_port);
    }
    ~silent_port() { ::close(fd_); }
    silent_port(const silent_port&) = delete;
    silent_port& operator=(const silent_port&) = delete;
    int port() const noexcept { return port_; }
    /// "127.0.0.1:PORT"
    std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

private:
    int fd_;
    int port_ = 0;
};

/// A name no other test of any process uses: "t<pid>-<random>-<counter>"
/// (for key prefixes and root nodes on the shared test servers).
inline std::string unique_name() {
    static std::atomic<int> counter{0};
    static const unsigned salt = std::random_device{}();
    std::string p = "t";  // built with += (g++ 12 warns falsely on "t" + std::to_string(...))
    p += std::to_string(::getpid());
    p += '-';
    p += std::to_string(salt);
    p += '-';
    p += std::to_string(counter++);
    return p;
}

/// A fixed instant for tests: 2026-10-13T09:00:00Z.
inline manual_clock::duration test_epoch() {
    using namespace std::chrono;
    return duration_cast<manual_clock::duration>(sys_days{year{2026} / 10 / 13}.time_since_epoch() + hours{9});
}

/// A claim of slot `key` scheduled at 2023-11-14T22:13:20Z, which a replay
/// window of a century still admits: the restore tests' done slot, claimed
/// directly on a store (ledger_store) before and after the store went back.
/// The request views `key` (a literal: it outlives every request).
inline ledger_claim_request old_slot_claim(std::string_view key) {
    using namespace std::chrono_literals;
    ledger_claim_request q;
    q.key = key;
    q.scheduled = 1'700'000'000'000ms;
    q.worker = "w";
    q.lease_ttl = 30s;
    q.replay_window = std::chrono::hours(24 * 365 * 100);
    return q;
}

/// Whether a factory's store floors new lease tokens by its clock (in
/// microseconds: every store but etcd and ZooKeeper, whose tokens are the
/// cluster's own counters, the revision and the zxid).
template <class Factory>
constexpr bool tokens_floored_by_time() {
    if constexpr (requires { Factory::tokens_floored_by_time; }) return Factory::tokens_floored_by_time;
    else return true;
}

/// Factories the typed conformance suites are instantiated with: each makes
/// a fresh store judged on the given manual_clock.
struct memory_factory {
    using store_type = basic_memory_store<manual_clock>;
    static constexpr const char* name = "memory";
    std::unique_ptr<store_type> make(manual_clock clock) { return std::make_unique<store_type>(clock); }
    /// A second handle on the same state (for a memory store: the same object).
    store_type* reopen(store_type* s, manual_clock) { return s; }
};

struct file_factory {
    using store_type = basic_file_store<manual_clock>;
    static constexpr const char* name = "file";
    scratch_dir dir;
    std::unique_ptr<store_type> make(manual_clock clock) {
        return std::make_unique<store_type>(dir / "state", clock);
    }
    /// A second store object on the same file, as another process would open it.
    std::unique_ptr<store_type> second;
    store_type* reopen(store_type*, manual_clock clock) {
        second = std::make_unique<store_type>(dir / "state", clock);
        return second.get();
    }
};

}  // namespace coord::test
