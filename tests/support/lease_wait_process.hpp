// SPDX-License-Identifier: Apache-2.0
// tests/support/lease_wait_process.hpp: the waiting acquire across
// processes, the same experiments on every store several processes share.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "coord/fence.hpp"
#include "coord/lease.hpp"
#include "support/child_process.hpp"

namespace coord::test {

using namespace std::chrono_literals;

// The waiting acquire across processes, on any store that several processes
// share (make() opens one; it is called in each child too): a waiter killed while queued holds
// up the next one no longer than its place's lease; a holder stopped past
// its term loses the lease to the first waiter, whose fenced writes then
// refuse the stopped holder's late write.
template <class Make>
void killed_waiter_delays_the_next_no_longer_than_its_place(Make make) {
    auto store_ptr = make();
    auto& store = *store_ptr;
    coord::basic_lease_manager leases{store};
    auto held = leases.acquire("job", "holder", 1h);
    ASSERT_TRUE(held);
    auto waiter = [&](const std::string& me) {
        return std::make_unique<coord::test::child_process>([&, me](int out) {
            auto sp = make();
            coord::basic_lease_manager l{*sp};
            auto got = l.acquire("job", me, 1h, std::chrono::steady_clock::now() + 30s, 500ms);
            const std::uint64_t token = got ? got->token : 0;
            return ::write(out, &token, sizeof token) == sizeof token ? 0 : 3;
        });
    };
    auto in_line = [&](std::size_t n) {
        for (int i = 0; i < 20000; ++i) {
            auto w = leases.waiters("job");
            if (w && w->size() >= n) return true;
            std::this_thread::sleep_for(1ms);
        }
        return false;
    };
    auto doomed = waiter("doomed");
    ASSERT_TRUE(in_line(1));
    auto next = waiter("next");
    ASSERT_TRUE(in_line(2));
    doomed->kill(SIGKILL);
    doomed->wait();
    const auto released = std::chrono::steady_clock::now();
    ASSERT_TRUE(leases.release(*held));
    std::uint64_t token = 0;
    ASSERT_TRUE(next->read(token));
    const auto took = std::chrono::steady_clock::now() - released;
    EXPECT_GT(token, held->token);
    // The dead waiter's place lapses within its 500 ms lease (a hang guard
    // beside the 1 h term, not a speed claim).
    EXPECT_LT(took, 3s);
    EXPECT_EQ(next->wait(), 0);
}

template <class Make>
void stopped_holder_loses_to_the_first_waiter(Make make) {
    { auto setup = make(); }
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    coord::test::child_process paused([&](int out) {
        ::close(go[1]);
        auto sp = make();
        coord::basic_lease_manager l{*sp};
        coord::basic_keyed_fenced_resource res{*sp};
        auto mine = l.acquire("job", "paused", 300ms);
        if (!mine) return 2;
        const std::uint64_t token = mine->token;
        if (::write(out, &token, sizeof token) != sizeof token) return 3;
        char c;
        if (::read(go[0], &c, 1) != 1) return 4;  // stopped before this, resumed after the takeover
        auto late = res.write("config", mine->token, "paused holder's late value");
        const std::int32_t code = late ? 0 : late.error().code.value();
        return ::write(out, &code, sizeof code) == sizeof code ? 0 : 5;
    });
    ::close(go[0]);
    std::uint64_t old_token = 0;
    ASSERT_TRUE(paused.read(old_token));
    paused.kill(SIGSTOP);
    coord::test::child_process waiter([&](int out) {
        auto sp = make();
        coord::basic_lease_manager l{*sp};
        coord::basic_keyed_fenced_resource res{*sp};
        auto got = l.acquire("job", "waiter", 10s, std::chrono::steady_clock::now() + 30s);
        if (!got || !res.write("config", got->token, "waiter's value")) return 2;
        const std::uint64_t token = got->token;
        return ::write(out, &token, sizeof token) == sizeof token ? 0 : 3;
    });
    std::uint64_t new_token = 0;
    ASSERT_TRUE(waiter.read(new_token));
    EXPECT_GT(new_token, old_token);
    EXPECT_EQ(waiter.wait(), 0);
    paused.kill(SIGCONT);
    ASSERT_EQ(::write(go[1], "g", 1), 1);
    std::int32_t code = -1;
    ASSERT_TRUE(paused.read(code));
    EXPECT_EQ(code, static_cast<std::int32_t>(coord::errc::stale_fence));
    ::close(go[1]);
    auto sp = make();
    auto v = sp->fence_read("config");
    ASSERT_TRUE(v);
    EXPECT_EQ(v->value, "waiter's value");
    EXPECT_EQ(v->fence, new_token);
}

}  // namespace coord::test
