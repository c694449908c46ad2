// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <utility>

#include <string>
#include <system_error>

#include "coord/error.hpp"
#include "coord/fence.hpp"
#include "coord/lease.hpp"
#include "coord/owner.hpp"
#include "coord/result.hpp"
#include "coord/storage/memory.hpp"

namespace {

coord::result<int> half(int x) {
    if (x % 2) return coord::unexpected(make_error_code(coord::errc::stale_fence));
    return x / 2;
}

TEST(Result, HoldsValueOrError) {
    auto ok = half(8);
    ASSERT_TRUE(ok);
    EXPECT_TRUE(ok.has_value());
    EXPECT_EQ(*ok, 4);
    EXPECT_EQ(ok.value(), 4);
    auto bad = half(3);
    EXPECT_FALSE(bad);
    EXPECT_EQ(bad.error(), coord::errc::stale_fence);
    EXPECT_THROW((void)bad.value(), coord::bad_result_access);
    EXPECT_EQ(bad.value_or(-1), -1);
}

TEST(Result, VoidFormAndCustomErrorType) {
    coord::result<void> ok;
    EXPECT_TRUE(ok);
    EXPECT_NO_THROW(ok.value());
    coord::result<void, std::string> bad = coord::unexpected(std::string("why"));
    EXPECT_FALSE(bad);
    EXPECT_EQ(bad.error(), "why");
    EXPECT_THROW(bad.value(), coord::bad_result_access);
    coord::result<std::string> s = std::string("abc");
    EXPECT_EQ(s->size(), 3u);
}

TEST(Errc, HasItsOwnCategoryAndMessages) {
    std::error_code ec = coord::errc::stale_fence;
    EXPECT_EQ(std::string(ec.category().name()), "coord");
    EXPECT_EQ(ec.message(), "stale fence");
    EXPECT_EQ(static_cast<int>(coord::errc::stale_fence), 1);
    EXPECT_EQ(std::error_code(coord::errc::clock_rollback).message(), "clock rollback");
    EXPECT_NE(ec, std::error_code(coord::errc::lease_held));
    EXPECT_NE(ec, std::make_error_code(std::errc::io_error));
}

// Callers decide by condition: every errc maps to exactly one, operating
// system errors are `unavailable`, and token refusals have their own
// category while comparing equal to their errc as before.
TEST(Errc, EveryCodeHasACondition) {
    using coord::condition;
    using coord::errc;
    const std::pair<errc, condition> expected[] = {
        {errc::stale_fence, condition::refused},          {errc::stale_sequence, condition::refused},
        {errc::lease_held, condition::refused},           {errc::not_lease_holder, condition::refused},
        {errc::lease_expired, condition::refused},        {errc::state_truncated, condition::corrupt_state},
        {errc::state_corrupt, condition::corrupt_state},  {errc::state_unsupported, condition::corrupt_state},
        {errc::state_went_back, condition::corrupt_state}, {errc::outcome_unknown, condition::outcome_unknown},
        {errc::clock_rollback, condition::refused},       {errc::sequence_exhausted, condition::refused},
        {errc::lease_lost, condition::refused},           {errc::time_exhausted, condition::refused},
        {errc::invalid_text, condition::bad_input},       {errc::allocator_unavailable, condition::unavailable},
        {errc::range_exhausted, condition::refused},      {errc::too_many_slots, condition::refused},
        {errc::token_expired, condition::refused},        {errc::token_bad_signature, condition::refused},
        {errc::token_revoked, condition::refused},        {errc::invalid_key, condition::bad_input},
        {errc::session_not_found, condition::refused},    {errc::session_expired, condition::refused},
        {errc::session_conflict, condition::refused},     {errc::state_not_regular, condition::corrupt_state},
        {errc::state_hard_linked, condition::corrupt_state}, {errc::state_too_large, condition::corrupt_state},
        {errc::lock_timeout, condition::unavailable},     {errc::wait_place_lost, condition::refused},
        {errc::store_uninitialized, condition::corrupt_state},
        {errc::store_identity_changed, condition::corrupt_state},
        {errc::store_already_initialized, condition::refused},
        {errc::cron_job_unknown, condition::refused},
        {errc::cron_cursor_corrupt, condition::corrupt_state},
        {errc::cron_schedule_conflict, condition::bad_input},
        {errc::value_too_large, condition::bad_input},
    };
    for (const auto& [e, c] : expected) {
        const std::error_code ec = e;
        EXPECT_EQ(ec, c) << ec.message();
        for (const auto other : {condition::refused, condition::outcome_unknown, condition::unavailable,
                                 condition::corrupt_state, condition::bad_input})
            if (other != c) {
                EXPECT_NE(ec, other) << ec.message();
            }
    }
    for (int v = 1; v <= static_cast<int>(errc::value_too_large); ++v) {
        const std::error_code ec = static_cast<errc>(v);
        int matches = 0;
        for (const auto c : {condition::refused, condition::outcome_unknown, condition::unavailable,
                             condition::corrupt_state, condition::bad_input})
            matches += ec == c;
        EXPECT_EQ(matches, 1) << ec.message();
    }
    EXPECT_EQ(std::make_error_code(std::errc::io_error), condition::unavailable);
    EXPECT_EQ(std::error_code(ENOENT, std::system_category()), condition::unavailable);
    EXPECT_NE(std::error_code(), condition::unavailable);
    const std::error_code token = errc::token_expired;
    EXPECT_EQ(std::string(token.category().name()), "coord.token");
    EXPECT_EQ(token, errc::token_expired);
    EXPECT_NE(token, errc::token_not_yet_valid);
    EXPECT_EQ(std::string(std::error_code(errc::session_expired).category().name()), "coord");
    EXPECT_EQ(std::string(coord::make_error_condition(condition::refused).message()), "refused by the primitive's rule");
}

// A fenced write's and a lease's refusal compare with every condition as
// every other result's error does (`r.error() == coord::condition::refused`).
TEST(Errc, WriteAndLeaseErrorsCompareByCondition) {
    using coord::condition;
    using coord::errc;
    coord::memory_store store;
    coord::basic_keyed_fenced_resource res{store};
    ASSERT_TRUE(res.write("k", 5, "v"));
    auto stale = res.write("k", 4, "w");
    ASSERT_FALSE(stale);
    EXPECT_TRUE(stale.error() == condition::refused);
    EXPECT_FALSE(stale.error() == condition::unavailable);
    EXPECT_TRUE(stale.error() == errc::stale_fence);
    coord::basic_lease_manager leases{store};
    ASSERT_TRUE(leases.acquire("n", "a", std::chrono::seconds{10}));
    auto held = leases.acquire("n", "b", std::chrono::seconds{10});
    ASSERT_FALSE(held);
    EXPECT_TRUE(held.error() == condition::refused);
    EXPECT_FALSE(held.error() == condition::outcome_unknown);
    EXPECT_TRUE(held.error() == errc::lease_held);
    const std::pair<errc, condition> each[] = {{errc::stale_fence, condition::refused},
                                               {errc::outcome_unknown, condition::outcome_unknown},
                                               {errc::lock_timeout, condition::unavailable},
                                               {errc::state_went_back, condition::corrupt_state},
                                               {errc::invalid_text, condition::bad_input}};
    for (const auto& [e, c] : each) {
        const coord::write_error w{e, 0};
        const coord::lease_error l{e, {}, 0, {}};
        for (const auto other : {condition::refused, condition::outcome_unknown, condition::unavailable,
                                 condition::corrupt_state, condition::bad_input}) {
            EXPECT_EQ(w == other, other == c) << w.code.message();
            EXPECT_EQ(l == other, other == c) << l.code.message();
        }
    }
    // An operating system error (an engine's I/O) is unavailable here too.
    const coord::write_error io{std::make_error_code(std::errc::io_error), 0};
    EXPECT_TRUE(io == condition::unavailable);
}

}  // namespace

TEST(UniqueOwner, NamesTheHostAndProcessAndIsNewOnEveryCall) {
    const std::string a = coord::unique_owner();
    const std::string b = coord::unique_owner();
    EXPECT_NE(a, b);
    char host[256] = {};
    ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
    const std::string pid = ":" + std::to_string(::getpid()) + ":";
    EXPECT_EQ(a.rfind(std::string(host) + pid, 0), 0u) << a;
    const std::string tail = a.substr(a.rfind(':') + 1);
    EXPECT_EQ(tail.size(), 16u) << a;
    EXPECT_EQ(tail.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
    EXPECT_EQ(coord::unique_owner("billing").rfind("billing" + pid, 0), 0u);
}
