// SPDX-License-Identifier: Apache-2.0
// UUIDs: the value type, RFC 9562's example, the generator's methods,
// rollback and overflow, threads, restarts, and fork-safe randomness.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <thread>
#include <unordered_set>
#include <vector>

#include "coord/random.hpp"
#include "coord/storage/memory.hpp"
#include "coord/uuid7.hpp"
#include "support/child_process.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using coord::manual_clock;
using coord::uuid;

/// A deterministic, thread-safe source: splitmix64 over a shared counter.
struct test_random {
    std::shared_ptr<std::atomic<std::uint64_t>> s = std::make_shared<std::atomic<std::uint64_t>>(42);
    std::uint64_t next_u64() const {
        std::uint64_t z = s->fetch_add(0x9E3779B97F4A7C15ull) + 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
};
/// Always the same value: every counter seed is the largest the guard bit allows.
struct max_seed_random {
    std::uint64_t next_u64() const { return 0x7FFF; }
};

template <class Random = test_random>
using gen_t = coord::basic_uuid7_generator<manual_clock, Random>;

TEST(Uuid, Rfc9562AppendixA6EncodesAndDecodes) {
    const auto u = uuid::make_v7(0x017F22E279B0, 0xCC3, 0x18C4DC0C0C07398F);
    EXPECT_EQ(u.to_string(), "017f22e2-79b0-7cc3-98c4-dc0c0c07398f");
    auto back = uuid::parse("017F22E2-79B0-7CC3-98C4-DC0C0C07398F");
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, u);
    EXPECT_EQ(back->version(), 7);
    EXPECT_EQ(back->variant(), uuid::variant_kind::rfc9562);
    EXPECT_EQ(back->unix_ts_ms(), 0x017F22E279B0u);
    EXPECT_EQ(back->rand_a(), 0xCC3);
    EXPECT_EQ(back->rand_b(), 0x18C4DC0C0C07398Fu);
    EXPECT_EQ(coord::format_utc(*back->time()), "2022-02-22T19:22:22.000Z");
}

TEST(Uuid, ParsesCanonicalAndUrnFormsInEitherCase) {
    const auto u = *uuid::parse("f81d4fae-7dec-11d0-a765-00a0c91e6bf6");
    EXPECT_EQ(u.version(), 1);
    EXPECT_FALSE(u.time());  // only v7 has a Unix time
    EXPECT_EQ(*uuid::parse("urn:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6"), u);
    EXPECT_EQ(*uuid::parse("URN:UUID:F81D4FAE-7DEC-11D0-A765-00A0C91E6BF6"), u);
    EXPECT_EQ(uuid::parse(u.to_string()), u);
    EXPECT_TRUE(uuid::parse("00000000-0000-0000-0000-000000000000")->is_nil());
}

TEST(Uuid, RefusesMalformedText) {
    for (const char* bad : {
             "",
             "f81d4fae-7dec-11d0-a765-00a0c91e6bf",     // short
             "f81d4fae-7dec-11d0-a765-00a0c91e6bf66",   // long
             "{f81d4fae-7dec-11d0-a765-00a0c91e6bf6}",  // braces
             "f81d4fae7dec11d0a76500a0c91e6bf6",        // no dashes
             "f81d4fa-e7dec-11d0-a765-00a0c91e6bf6",    // misplaced dash
             "f81d4fae-7dec-11d0-a765_00a0c91e6bf6",    // wrong separator
             "g81d4fae-7dec-11d0-a765-00a0c91e6bf6",    // not hex
             "f81d4fae-7dec-11d0-a765-00a0c91e6bf ",    // trailing space
             "urn:uuid:{f81d4fae-7dec-11d0-a765-00a0c9",
             "urn:uid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6",
             "urx:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6",
         })
        EXPECT_EQ(uuid::parse(bad).error(), coord::errc::invalid_text) << bad;
}

TEST(Uuid, ComparesInByteOrderAndHashes) {
    const auto a = uuid::make_v7(1, 0, 0), b = uuid::make_v7(2, 0, 0), c = uuid::make_v7(2, 1, 0);
    EXPECT_LT(a, b);
    EXPECT_LT(b, c);
    EXPECT_LT(a.to_string(), b.to_string());
    std::unordered_set<uuid> set{a, b, c, a};
    EXPECT_EQ(set.size(), 3u);
}

TEST(ChaCha20, Rfc8439BlockFunctionVector) {
    std::uint32_t key[8];
    for (std::uint32_t i = 0; i < 8; ++i) key[i] = (4 * i) | ((4 * i + 1) << 8) | ((4 * i + 2) << 16) | ((4 * i + 3) << 24);
    const std::uint32_t nonce[3] = {0x09000000, 0x4a000000, 0};
    std::uint8_t out[64];
    coord::detail::chacha20_block(key, 1, nonce, out);
    const std::uint8_t expected[64] = {
        0x10, 0xf1, 0xe7, 0xe4, 0xd1, 0x3b, 0x59, 0x15, 0x50, 0x0f, 0xdd, 0x1f, 0xa3, 0x20, 0x71, 0xc4,
        0xc7, 0xd1, 0xf4, 0xc7, 0x33, 0xc0, 0x68, 0x03, 0x04, 0x22, 0xaa, 0x9a, 0xc3, 0xd4, 0x6c, 0x4e,
        0xd2, 0x82, 0x64, 0x46, 0x07, 0x9f, 0xaa, 0x09, 0x14, 0xc2, 0xd7, 0x05, 0xd9, 0x8b, 0x02, 0xa2,
        0xb5, 0x12, 0x9c, 0xd1, 0xde, 0x16, 0x4e, 0xb9, 0xcb, 0xd0, 0x83, 0xe8, 0xa2, 0x50, 0x3c, 0x4e};
    EXPECT_EQ(0, std::memcmp(out, expected, 64));
    // The 4-lane form gives the same bytes as four single blocks.
    std::uint8_t four[256], singles[256];
    coord::detail::chacha_blocks4<20>(key, 1, nonce, four);
    for (std::uint32_t b = 0; b < 4; ++b) coord::detail::chacha20_block(key, 1 + b, nonce, singles + 64 * b);
    EXPECT_EQ(0, std::memcmp(four, singles, 256));
    EXPECT_EQ(0, std::memcmp(four, expected, 64));
#ifdef COORD_X86_SIMD
    // The 8-lane AVX2 form too, on a counter whose lanes carry across a byte.
    if (coord::detail::cpu_has_avx2()) {
        std::uint8_t eight[512], singles8[512];
        coord::detail::chacha_blocks8_avx2<20>(key, 1, nonce, eight);
        EXPECT_EQ(0, std::memcmp(eight, expected, 64));
        coord::detail::chacha_blocks8_avx2<12>(key, 0xFC, nonce, eight);
        for (std::uint32_t b = 0; b < 8; b += 4) coord::detail::chacha_blocks4<12>(key, 0xFC + b, nonce, singles8 + 64 * b);
        EXPECT_EQ(0, std::memcmp(eight, singles8, 512));
    }
#endif
}

TEST(Uuid7, MillionUuidsAreV7StrictlyIncreasingWithTheClocksTime) {
    manual_clock clock{coord::test::test_epoch()};
    gen_t<> gen{{}, clock, test_random{}};
    uuid prev;
    std::string prev_text;
    for (int i = 0; i < 1'000'000; ++i) {
        if (i % 1000 == 0) clock.advance(1ms);
        auto u = gen.next();
        ASSERT_TRUE(u);
        ASSERT_EQ(u->version(), 7);
        ASSERT_EQ(u->variant(), uuid::variant_kind::rfc9562);
        ASSERT_EQ(static_cast<std::int64_t>(u->unix_ts_ms()), coord::unix_millis(clock.now()));
        ASSERT_LT(prev, *u);
        auto text = u->to_string();
        ASSERT_LT(prev_text, text);
        prev = *u;
        prev_text = std::move(text);
    }
    EXPECT_EQ(gen.stats().counter_overflows, 0u);
}

TEST(Uuid7, TwoThreadsSharingOneGeneratorGetIncreasingUniqueUuids) {
    manual_clock clock{coord::test::test_epoch()};
    gen_t<> gen{{}, clock, test_random{}};
    std::vector<uuid> a, b;
    auto draw = [&](std::vector<uuid>& out) {
        for (int i = 0; i < 200'000; ++i) {
            if (i % 5000 == 0) clock.advance(1ms);
            out.push_back(*gen.next());
        }
    };
    std::thread ta([&] { draw(a); }), tb([&] { draw(b); });
    ta.join();
    tb.join();
    EXPECT_TRUE(std::adjacent_find(a.begin(), a.end(), std::greater_equal<>()) == a.end());
    EXPECT_TRUE(std::adjacent_find(b.begin(), b.end(), std::greater_equal<>()) == b.end());
    std::set<uuid> all(a.begin(), a.end());
    all.insert(b.begin(), b.end());
    EXPECT_EQ(all.size(), 400'000u);
}

TEST(Uuid7, ClockBackWithinTheBoundKeepsIssuingAfterTheLastTimestamp) {
    manual_clock clock{coord::test::test_epoch()};
    gen_t<> gen{{}, clock, test_random{}};
    const auto first = *gen.next();
    clock.advance(-5s);
    const auto second = *gen.next();
    EXPECT_GT(second, first);
    EXPECT_EQ(second.unix_ts_ms(), first.unix_ts_ms());
    EXPECT_EQ(gen.stats().rollbacks_absorbed, 1u);
}

TEST(Uuid7, ClockBackPastTheBoundRejectsOrAcceptsAndSaysSo) {
    manual_clock clock{coord::test::test_epoch()};
    coord::uuid7_options o;
    o.rollback_bound = 10s;
    gen_t<> reject{o, clock, test_random{}};
    o.past_bound = coord::uuid7_rollback_policy::accept;
    gen_t<> accept{o, clock, test_random{}};
    const auto r0 = *reject.next();
    const auto a0 = *accept.next();
    clock.advance(-11s);
    EXPECT_EQ(reject.next().error(), coord::errc::clock_rollback);
    EXPECT_EQ(reject.stats().rollbacks_rejected, 1u);
    const auto a1 = *accept.next();
    EXPECT_EQ(a1.unix_ts_ms(), a0.unix_ts_ms() - 11000);
    EXPECT_EQ(accept.stats().rollbacks_accepted, 1u);
    clock.advance(11s + 1ms);
    EXPECT_GT(*reject.next(), r0);  // caught up
}

TEST(Uuid7, CounterOverflowMovesTheTimestampForwardNeverWraps) {
    manual_clock clock{coord::test::test_epoch()};
    gen_t<max_seed_random> gen{{}, clock, max_seed_random{}};
    const auto ms = static_cast<std::uint64_t>(coord::unix_millis(clock.now()));
    uuid prev;
    // Seeded at 0x7FFF, the 16-bit counter has 0x8001 values in this millisecond.
    for (int i = 0; i < 0x8001; ++i) {
        const auto u = *gen.next();
        ASSERT_LT(prev, u);
        ASSERT_EQ(u.unix_ts_ms(), ms);
        prev = u;
    }
    const auto carried = *gen.next();
    EXPECT_GT(carried, prev);
    EXPECT_EQ(carried.unix_ts_ms(), ms + 1);
    EXPECT_EQ(gen.stats().counter_overflows, 1u);
}

TEST(Uuid7, ClockPrecisionMethodPutsSubMillisecondTimeInRandA) {
    manual_clock clock{coord::test::test_epoch() + 500us};
    coord::uuid7_options o;
    o.method = coord::uuid7_method::clock_precision;
    gen_t<> gen{o, clock, test_random{}};
    const auto a = *gen.next();
    EXPECT_EQ(a.rand_a(), 2048);  // 0.5 ms in 1/4096 ms
    const auto b = *gen.next();   // the clock did not move: the next step up
    EXPECT_EQ(b.rand_a(), 2049);
    EXPECT_GT(b, a);
    clock.advance(250us);
    EXPECT_EQ(gen.next()->rand_a(), 3072);
}

TEST(Uuid7, RandomMethodIsV7WithoutOrderPromise) {
    manual_clock clock{coord::test::test_epoch()};
    coord::uuid7_options o;
    o.method = coord::uuid7_method::random;
    gen_t<> gen{o, clock, test_random{}};
    std::set<uuid> seen;
    for (int i = 0; i < 1000; ++i) {
        const auto u = *gen.next();
        EXPECT_EQ(u.version(), 7);
        EXPECT_EQ(static_cast<std::int64_t>(u.unix_ts_ms()), coord::unix_millis(clock.now()));
        seen.insert(u);
    }
    EXPECT_EQ(seen.size(), 1000u);
}

TEST(Uuid7, StoreKeepsOrderAcrossARestartWithTheClockSetBack) {
    manual_clock clock{coord::test::test_epoch()};
    coord::basic_memory_store<manual_clock> store{clock};
    using store_gen = coord::basic_uuid7_generator<manual_clock, test_random, decltype(store)>;
    coord::uuid7_options o;
    o.rollback_bound = 60s;  // every restart below lands up to ~2.7 s further behind the reservation
    uuid last;
    for (int run = 0; run < 20; ++run) {
        store_gen gen{store, o, clock, test_random{}};
        for (int i = 0; i < 100; ++i) {
            auto u = gen.next();
            ASSERT_TRUE(u) << u.error().message();
            ASSERT_GT(*u, last) << "run " << run;
            last = *u;
            clock.advance(3ms);
        }
        clock.advance(-2s);  // restart with the clock set back, within the bound
    }
}

TEST(Uuid7, RefusesBadOptions) {
    coord::uuid7_options o;
    o.rollback_bound = -1ms;
    EXPECT_THROW((gen_t<>{o, manual_clock{}, test_random{}}), std::invalid_argument);
    coord::memory_store store;
    coord::uuid7_options w;
    w.reserve_ahead = 20s;  // beyond the 10 s bound
    EXPECT_THROW((coord::basic_uuid7_generator<coord::system_clock, coord::os_random, coord::memory_store>{store, w}),
                 std::invalid_argument);
}

TEST(Uuid7, PerThreadFormAndFreeFunction) {
    manual_clock clock{coord::test::test_epoch()};
    coord::basic_uuid7_local<manual_clock, test_random> local{{}, clock, test_random{}};
    uuid prev;
    for (int i = 0; i < 10000; ++i) {
        const auto u = *local.next();
        ASSERT_LT(prev, u);
        prev = u;
    }
    const auto a = *coord::uuid7(), b = *coord::uuid7();
    EXPECT_LT(a, b);
    EXPECT_EQ(a.version(), 7);
}

// A forked child must not hand out the bytes its parent will: the per-thread
// buffer re-keys from the OS in the child.
TEST(OsRandom, ForkedChildReseeds) {
    coord::os_random rng;
    (void)rng.next_u64();  // the parent's buffer is full of future output
    coord::test::child_process child([&](int out) {
        std::uint64_t v[4];
        for (auto& x : v) x = rng.next_u64();
        return ::write(out, v, sizeof v) == sizeof v ? 0 : 1;
    });
    std::uint64_t child_values[4] = {}, parent[4];
    for (auto& x : child_values) ASSERT_TRUE(child.read(x));
    child.wait();
    for (auto& x : parent) x = rng.next_u64();
    EXPECT_NE(0, std::memcmp(child_values, parent, sizeof parent));
    for (int i = 0; i < 4; ++i) EXPECT_NE(child_values[i], parent[i]);
}

TEST(OsRandom, ValuesLookUniform) {
    coord::os_random rng;
    int ones = 0;
    for (int i = 0; i < 10000; ++i) ones += __builtin_popcountll(rng.next_u64());
    // 640,000 bits: a fair source lands within 640 (5 standard deviations) of half.
    EXPECT_NEAR(ones, 320000, 2000);
}

}  // namespace
