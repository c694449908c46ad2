// SPDX-License-Identifier: Apache-2.0
// coord/detail/connection_pool.hpp: the idle connections of an engine's
// pool, handed out under the call's deadline. Shared by every engine whose
// client library has no pool of its own (PostgreSQL, Redis): a call takes one
// connection for its whole step and gives it back; a connection that broke is
// given back closed and reopened by the next call that takes it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "coord/detail/deadline.hpp"

namespace coord::detail {

template <class Connection>
class connection_pool {
public:
    explicit connection_pool(std::size_t size) : size_(size) {}
    connection_pool(const connection_pool&) = delete;
    connection_pool& operator=(const connection_pool&) = delete;

    /// An idle connection, or a new (unopened) one while fewer than `size`
    /// exist; nullptr when none came free by `until`.
    std::unique_ptr<Connection> take(deadline until) {
        std::unique_lock lk(mutex_);
        auto free = [&] { return !idle_.empty() || created_ < size_; };
        if (!cv_.wait_until(lk, until, free)) return nullptr;
        if (!idle_.empty()) {
            auto c = std::move(idle_.back());
            idle_.pop_back();
            return c;
        }
        ++created_;
        return std::make_unique<Connection>();
    }

    /// Back to the idle list (open or not), waking one waiting call.
    void give(std::unique_ptr<Connection> c) {
        if (!c) return;
        {
            std::lock_guard lk(mutex_);
            idle_.push_back(std::move(c));
        }
        cv_.notify_one();
    }

    std::size_t size() const noexcept { return size_; }

private:
    std::size_t size_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<std::unique_ptr<Connection>> idle_;
    std::size_t created_ = 0;
};

}  // namespace coord::detail
