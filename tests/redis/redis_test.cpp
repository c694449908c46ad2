// SPDX-License-Identifier: Apache-2.0
// Redis-only behaviour: expiry on the server's clock, exact 64-bit numbers in
// Lua, the script cache, one hash tag per store, the store's identity and
// what happens when the server loses its data, a SIGKILL with the durable
// settings, the server's refusals (MISCONF, READONLY, LOADING), a paused
// server and a port that never answers.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <type_traits>

#include "coord/fence.hpp"
#include "coord/job_ledger.hpp"
#include "coord/lease.hpp"
#include "coord/open.hpp"
#include "coord/segment.hpp"
#include "redis/redis_support.hpp"
#include "support/failover_checks.hpp"
#include "support/lease_watch_check.hpp"

namespace {

using namespace std::chrono_literals;
using coord::test::redis_command;
using coord::test::redis_fresh_prefix;
using coord::test::redis_options;
using coord::test::redis_url;

std::string server(const std::string& what) {
    return std::string(COORD_REDIS_SCRIPT) + " " + what + " '" + COORD_REDIS_DIR + "' " + COORD_REDIS_PORT;
}
void run(const std::string& what) { ASSERT_EQ(std::system(server(what).c_str()), 0) << server(what); }

// A token as the fence and lease records keep it: 20 digits, zeros in front.
std::string twenty(std::uint64_t v) {
    const std::string d = std::to_string(v);
    return std::string(20 - d.size(), '0') + d;
}

// A fresh, initialized store on the server's clock.
std::unique_ptr<coord::redis::store> fresh_store(const std::string& prefix = redis_fresh_prefix(),
                                                 coord::redis::options o = {}) {
    o.prefix = prefix;
    auto s = std::make_unique<coord::redis::store>(redis_url(), coord::redis::server_clock{}, o);
    auto init = s->initialize(coord::redis::initial_floors{});
    if (!init) ADD_FAILURE() << init.error().message();
    return s;
}

// Retries a call while the server comes back (a restart drops connections).
template <class F>
auto until_answered(F f) {
    auto r = f();
    for (int i = 0; i < 200 && !r && r.error() != coord::condition::refused &&
                    r.error() != coord::condition::corrupt_state;
         ++i) {
        std::this_thread::sleep_for(20ms);
        r = f();
    }
    return r;
}

// coord/open.hpp with the Redis engine linked: the test server's URL opens a
// Redis store (a fence on it works); a malformed redis:// URL is refused
// before anything is opened.
// The everyday names on this engine (coord/detail/store_aliases.hpp).
static_assert(std::is_same_v<coord::redis::lease_manager, coord::basic_lease_manager<coord::redis::store>>);
static_assert(std::is_same_v<coord::redis::fenced_resource, coord::basic_fenced_resource<coord::redis::store>>);
static_assert(std::is_same_v<coord::redis::snowflake,
                             coord::basic_snowflake<coord::default_layout, coord::system_clock, coord::redis::store>>);
static_assert(std::is_same_v<coord::redis::segment_generator, coord::basic_segment_generator<coord::redis::store>>);
static_assert(std::is_same_v<coord::redis::job_ledger, coord::basic_job_ledger<coord::redis::store>>);
static_assert(std::is_same_v<coord::redis::session_manager, coord::basic_session_manager<coord::redis::store>>);

TEST(Redis, AStoreUrlOpensTheRedisStoreAndAMalformedOneIsBadInput) {
    // The lambda is made for every store type the URL could name; only the
    // Redis one may run.
    const auto token = coord::with_store(coord::test::redis_url(), [](auto& store) -> coord::fence_token {
        if constexpr (!std::is_same_v<std::remove_cvref_t<decltype(store)>, coord::redis::store>) {
            ADD_FAILURE() << "a redis:// URL opened another store";
            return 0;
        } else {
            coord::basic_lease_manager leases{store};
            auto l = leases.acquire("open-test-" + std::to_string(::getpid()), "a", std::chrono::seconds{10});
            return l ? l->token : 0;
        }
    });
    EXPECT_GT(token, 0u);
    // Options from the URL: two prefixes are two key spaces on one server.
    const std::string name = "open-prefix-" + std::to_string(::getpid());
    auto a = coord::open_store<coord::redis::store>(coord::test::redis_url() + "?prefix=open-a&pool=2");
    auto a_again = coord::open_store<coord::redis::store>(coord::test::redis_url() + "?pool=1&prefix=open-a");
    auto b = coord::open_store<coord::redis::store>(coord::test::redis_url() + "?prefix=open-b");
    EXPECT_EQ(a.opts().pool_size, 2u);
    EXPECT_TRUE(a.lease_acquire(name, "x", std::chrono::seconds{10}));
    EXPECT_EQ(a_again.lease_acquire(name, "y", std::chrono::seconds{10}).error().code, coord::errc::lease_held);
    EXPECT_TRUE(b.lease_acquire(name, "y", std::chrono::seconds{10}));
    for (const char* url : {"redis://127.0.0.1:1:2", "redis://127.0.0.1:99999", "redis://h%41:1", "redis://127.0.0.1:1/notadb",
                            "redis://127.0.0.1:1?pool=0", "redis://127.0.0.1:1?db=1"}) {
        try {
            coord::with_store(url, [](auto&) { return 0; });
            ADD_FAILURE() << url << " opened";
        } catch (const coord::bad_store_url& e) {
            EXPECT_NE(std::string(e.what()).find("store URL '"), std::string::npos) << e.what();
        }
    }
}

// Every command the server has run (INFO commandstats: the sum of calls=,
// those inside scripts included).
std::uint64_t commands_run() {
    const auto text = redis_command({"INFO", "commandstats"});
    std::uint64_t total = 0;
    for (auto p = text.find("calls="); p != std::string::npos; p = text.find("calls=", p + 6)) {
        std::uint64_t n = 0;
        std::from_chars(text.data() + p + 6, text.data() + text.size(), n);
        total += n;
    }
    return total;
}

// What keeping the last place of a line of `waiters` costs the server: the
// commands one queued acquire runs (the waiter behind all the others: its
// place renewed, the holder's refusal answered).
std::uint64_t upkeep_commands(coord::redis::store& store, const std::string& name, int waiters) {
    if (!store.lease_acquire(name, "holder", std::chrono::hours{1})) ADD_FAILURE() << "holder's acquire";
    std::uint64_t last = 0;
    // (Names built by +=: g++ 12's -Wrestrict misfires on "w" + to_string.)
    auto waiter = [](int i) {
        std::string w = "w";
        w += std::to_string(i);
        return w;
    };
    for (int i = 0; i < waiters; ++i) {
        auto t = store.lease_enqueue(name, waiter(i), std::chrono::minutes{10});
        if (!t) ADD_FAILURE() << t.error().message();
        else last = *t;
    }
    const std::string owner = waiter(waiters - 1);
    (void)store.lease_acquire_queued(name, owner, std::chrono::seconds{10}, last, std::chrono::minutes{10});  // scripts loaded
    const auto before = commands_run();
    auto r = store.lease_acquire_queued(name, owner, std::chrono::seconds{10}, last, std::chrono::minutes{10});
    const auto after = commands_run();
    EXPECT_EQ(r.error(), coord::errc::lease_held);
    EXPECT_EQ(r.error().ahead, static_cast<std::size_t>(waiters - 1));
    return after - before;
}

// A waiter's upkeep costs the same however long the line is (issue 37: every
// renewal used to scan the whole line, one HGET a place).
TEST(Redis, KeepingAPlaceInLineCostsTheSameHoweverLongTheLineIs) {
    auto store = fresh_store();
    const auto short_line = upkeep_commands(*store, "upkeep-short", 3);
    const auto long_line = upkeep_commands(*store, "upkeep-long", 200);
    EXPECT_EQ(short_line, long_line);
    EXPECT_LE(long_line, 7u);  // the script and its 4 commands, and this test's INFO
}

TEST(Redis, LeaseExpiryIsOnTheServerClockAndTokensAreFlooredByIt) {
    auto store = fresh_store();
    const auto before = store->server_now_ns();
    ASSERT_TRUE(before) << before.error().message();
    auto l = store->lease_acquire("db-primary", "A", 1h);
    ASSERT_TRUE(l) << l.error().code.message();
    const auto after = store->server_now_ns();
    ASSERT_TRUE(after);
    EXPECT_GE(l->expires_at.count(), *before + std::chrono::nanoseconds(1h).count());
    EXPECT_LE(l->expires_at.count(), *after + std::chrono::nanoseconds(1h).count());
    // The token is at least the server's time in microseconds.
    EXPECT_GE(l->token, static_cast<std::uint64_t>(*before / 1000));
    EXPECT_LE(l->token, static_cast<std::uint64_t>(*after / 1000));
    auto b = store->lease_acquire("db-primary", "B", 1h);
    ASSERT_FALSE(b);
    EXPECT_EQ(b.error(), coord::errc::lease_held);
    EXPECT_EQ(b.error().holder, "A");
    // After a release the next grant takes the common path (the script
    // answers its token alone): the same promises, and the term it reports is
    // the one the server keeps. The owner may hold any bytes, a newline too.
    ASSERT_TRUE(store->lease_release("db-primary", "A", l->token));
    const std::string owner = "B\nsecond line";
    const auto before2 = store->server_now_ns();
    ASSERT_TRUE(before2);
    auto again = store->lease_acquire("db-primary", owner, 1h);
    ASSERT_TRUE(again) << again.error().code.message();
    const auto after2 = store->server_now_ns();
    ASSERT_TRUE(after2);
    EXPECT_EQ(again->owner, owner);
    EXPECT_GT(again->token, l->token);
    EXPECT_GE(again->token, static_cast<std::uint64_t>(*before2 / 1000));
    EXPECT_LE(again->token, static_cast<std::uint64_t>(*after2 / 1000));
    EXPECT_GE(again->expires_at.count(), *before2 + std::chrono::nanoseconds(1h).count());
    EXPECT_LE(again->expires_at.count(), *after2 + std::chrono::nanoseconds(1h).count());
    auto read = store->lease_read("db-primary");
    ASSERT_TRUE(read && *read);
    EXPECT_EQ((*read)->owner, owner);
    EXPECT_EQ((*read)->token, again->token);
    EXPECT_EQ((*read)->expires_at, again->expires_at);
    auto held = store->lease_acquire("db-primary", "A", 1h);
    ASSERT_FALSE(held);
    EXPECT_EQ(held.error().holder, owner);
    EXPECT_TRUE(store->lease_renew("db-primary", owner, again->token, 1h));
    EXPECT_FALSE(store->lease_release("db-primary", "B", again->token));
    EXPECT_TRUE(store->lease_release("db-primary", owner, again->token));
}

// A release leaves the line unread when no one joined it since a release
// found it empty (the lease's w flag). A waiter who joins after such a
// release must still be woken by the next one: the test releases only once
// the waiter listens on its channel (it has looked once and found the lease
// held), and the term and the place last an hour, so only the release's
// PUBLISH, or else the waiter's deadline (60 s), ends its wait. Twice: the
// line is found empty again in between.
TEST(Redis, AWaiterWhoJoinsAfterAReleaseFoundTheLineEmptyIsWokenByTheNext) {
    const std::string prefix = redis_fresh_prefix();
    auto store = fresh_store(prefix);
    coord::basic_lease_manager<coord::redis::store> leases{*store};
    auto first = leases.acquire("job", "holder", 1h);
    ASSERT_TRUE(first);
    ASSERT_TRUE(leases.release(*first));  // nobody in line
    for (const char* who : {"next", "last"}) {
        auto held = leases.acquire("job", "holder", 1h);
        ASSERT_TRUE(held) << held.error().code.message();
        coord::result<coord::lease, coord::lease_error> l;
        std::chrono::steady_clock::time_point got{};
        std::thread w([&] {
            l = leases.acquire("job", who, 1h, std::chrono::steady_clock::now() + 60s, std::chrono::milliseconds{1h});
            got = std::chrono::steady_clock::now();
        });
        // The waiter's channel has a subscriber: it is past its last look.
        const auto give_up = std::chrono::steady_clock::now() + 20s;
        while (redis_command({"PUBSUB", "CHANNELS", "*" + prefix + "*lw*"}).empty()) {
            ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "the waiter never listened";
            std::this_thread::yield();
        }
        const auto released = std::chrono::steady_clock::now();
        ASSERT_TRUE(leases.release(*held));
        w.join();
        ASSERT_TRUE(l) << l.error().code.message();
        EXPECT_EQ(l->owner, who);
        EXPECT_GT(l->token, held->token);
        // Half the deadline: an unwoken waiter gets the lease only at its deadline's last try.
        EXPECT_LT(got - released, 30s) << who << " was not woken by the release";
        ASSERT_TRUE(leases.release(*l));  // the line is empty again
    }
}

TEST(Redis, TokensFencesAndCountersStayExactAbove2To53) {
    auto store = fresh_store();
    constexpr std::uint64_t p62 = std::uint64_t{1} << 62;
    constexpr std::uint64_t max63 = (std::uint64_t{1} << 63) - 1;
    constexpr std::uint64_t max64 = std::numeric_limits<std::uint64_t>::max();
    // Fences: neighbours that doubles cannot tell apart.
    ASSERT_TRUE(store->fence_write("k", p62 + 1, "a"));
    auto stale = store->fence_write("k", p62, "b");
    ASSERT_FALSE(stale);
    EXPECT_EQ(stale.error(), coord::errc::stale_fence);
    EXPECT_EQ(stale.error().highest, p62 + 1);
    ASSERT_TRUE(store->fence_write("k", max63 - 1, "c"));
    EXPECT_EQ(store->fence_write("k", max63 - 2, "d").error(), coord::errc::stale_fence);
    ASSERT_TRUE(store->fence_write("k", max63, 7, "e"));
    EXPECT_EQ(store->fence_write("k", max63, 7, "f").error(), coord::errc::stale_sequence);
    ASSERT_TRUE(store->fence_write("k", max64, "g"));
    EXPECT_EQ(store->fence_write("k", max64 - 1, "h").error().highest, max64);
    auto v = store->fence_read("k");
    ASSERT_TRUE(v);
    EXPECT_EQ(v->fence, max64);
    EXPECT_EQ(v->value, "g");
    // Reservations under such tokens.
    ASSERT_TRUE(store->time_reserve("node", 1000, max63 - 1));
    auto r = store->time_reserve("node", 2000, max63 - 2);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().highest, max63 - 1);
    // Lease tokens continue exactly from a last token near the top.
    // (The record: "<held><w><last: 20 digits> <n>\n<holder> <ttl> <start>".)
    ASSERT_TRUE(store->lease_acquire("big", "A", 1h));
    EXPECT_EQ(redis_command({"SET", store->key_tag() + "lease:big", "10" + twenty(p62) + " 1\nA 1 1"}), "OK");
    ASSERT_TRUE(store->lease_release("big", "A", 0));
    auto l = store->lease_acquire("big", "B", 1h);
    ASSERT_TRUE(l);
    EXPECT_EQ(l->token, p62 + 1);
    ASSERT_TRUE(store->lease_release("big", "B", l->token));
    EXPECT_EQ(redis_command({"SET", store->key_tag() + "lease:big", "00" + twenty(max63 - 1) + " 0\n "}), "OK");
    l = store->lease_acquire("big", "C", 1h);
    ASSERT_TRUE(l);
    EXPECT_EQ(l->token, max63);
    // Segments up to the last ID, then exhausted.
    auto a = store->segment_allocate("ids", p62);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->begin, 1u);
    EXPECT_EQ(a->end, p62 + 1);
    auto b = store->segment_allocate("ids", max63 - p62 - 1);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->begin, p62 + 1);
    EXPECT_EQ(b->end, max63);
    auto c = store->segment_allocate("ids", 1);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->begin, max63);
    EXPECT_EQ(c->end, coord::segment_id_limit);
    EXPECT_EQ(store->segment_allocate("ids", 1).error(), coord::errc::range_exhausted);
}

// Writes go first (SET ... GET) and are put back when the rule refuses:
// whatever a refusal or a foreign key makes the script do, the key holds
// afterwards exactly what it held before.
TEST(Redis, ARefusalOrAKeyCoordDidNotWriteLeavesTheKeyAsItWas) {
    auto store = fresh_store();
    const std::string fence_key = store->key_tag() + "fence:f";
    const std::string lease_key = store->key_tag() + "lease:n";
    ASSERT_TRUE(store->fence_write("f", 5, 1, "five"));
    const std::string before = redis_command({"GET", fence_key});
    EXPECT_EQ(store->fence_write("f", 4, "stale").error(), coord::errc::stale_fence);
    EXPECT_EQ(store->fence_write("f", 5, 1, "again").error(), coord::errc::stale_sequence);
    EXPECT_EQ(redis_command({"GET", fence_key}), before);
    auto l = store->lease_acquire("n", "A", 1h);
    ASSERT_TRUE(l);
    const std::string held = redis_command({"GET", lease_key});
    auto refused = store->lease_acquire("n", "B", 1h);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error(), coord::errc::lease_held);
    EXPECT_EQ(refused.error().holder, "A");
    EXPECT_EQ(refused.error().token, l->token);
    EXPECT_EQ(refused.error().expires_at, l->expires_at);
    EXPECT_EQ(store->lease_release("n", "B", l->token).error(), coord::errc::not_lease_holder);
    EXPECT_EQ(store->lease_release("n", "A", l->token + 1).error(), coord::errc::not_lease_holder);
    EXPECT_EQ(redis_command({"GET", lease_key}), held);
    EXPECT_EQ(store->lease_release("m", "A", 7).error(), coord::errc::not_lease_holder);
    EXPECT_EQ(redis_command({"EXISTS", store->key_tag() + "lease:m"}), "0") << "a refused release must leave no record";

    // Keys that hold what coord did not write: refused, nothing changed.
    EXPECT_EQ(redis_command({"SET", fence_key, "not a fence"}), "OK");
    auto f = store->fence_write("f", 9, "v");
    ASSERT_FALSE(f);
    EXPECT_EQ(f.error(), coord::errc::state_corrupt) << f.error().code.message();
    EXPECT_EQ(f.error().code, coord::condition::corrupt_state);
    EXPECT_EQ(store->fence_read("f").error(), coord::errc::state_corrupt);
    EXPECT_EQ(redis_command({"GET", fence_key}), "not a fence");
    EXPECT_EQ(redis_command({"SET", lease_key, "not a lease"}), "OK");
    EXPECT_EQ(store->lease_acquire("n", "A", 1h).error(), coord::errc::state_corrupt);
    EXPECT_EQ(store->lease_release("n", "A", 3).error(), coord::errc::state_corrupt);
    EXPECT_EQ(store->lease_read("n").error(), coord::errc::state_corrupt);
    EXPECT_EQ(redis_command({"GET", lease_key}), "not a lease");
    EXPECT_EQ(redis_command({"DEL", lease_key}), "1");
    EXPECT_EQ(redis_command({"HSET", lease_key, "last", "5"}), "1");  // another type, as an older coord kept it
    auto typed = store->lease_acquire("n", "A", 1h);
    ASSERT_FALSE(typed);
    EXPECT_EQ(typed.error(), coord::errc::state_corrupt) << typed.error().code.message();
    EXPECT_EQ(redis_command({"HGET", lease_key, "last"}), "5");
}

// The common paths decide from two string comparisons (fence, acquire) or a
// find (release) instead of a parse: records they must not pass go to the
// whole rule. Records are planted as the layout has them (scripts.hpp).
TEST(Redis, ALeaseWatchWakesAtAGrantAndARelease) {
    auto store = fresh_store();
    coord::redis::store other{redis_url(), coord::redis::server_clock{}, store->opts()};
    coord::test::expect_lease_watch_wakes(*store, other, /*rearms=*/false);
}

TEST(Redis, AnObserverWhoLeftNoLongerCostsAGrantOrAReleaseAPublish) {
    auto store = fresh_store();
    const std::string key = store->key_tag() + "lease:n";
    auto l = store->lease_acquire("n", "A", 1h);
    ASSERT_TRUE(l);
    {
        auto watch = store->lease_watching("n");
        EXPECT_TRUE(watch.wait(std::chrono::steady_clock::now() + 60s));  // subscribed, w set
        EXPECT_EQ(redis_command({"GET", key}).substr(0, 2), "11");
        ASSERT_TRUE(store->lease_release("n", "A", l->token));
        EXPECT_TRUE(watch.wait(std::chrono::steady_clock::now() + 60s));  // the release was published
        EXPECT_EQ(redis_command({"GET", key}).substr(0, 2), "01");        // a subscriber heard it: w stays
    }
    // The observer left: the next release finds no subscriber and clears w,
    // so the grant and the release after it take the common paths again.
    l = store->lease_acquire("n", "A", 1h);
    ASSERT_TRUE(l);
    ASSERT_TRUE(store->lease_release("n", "A", l->token));
    EXPECT_EQ(redis_command({"GET", key}).substr(0, 2), "00");
    l = store->lease_acquire("n", "A", 1h);
    ASSERT_TRUE(l);
    EXPECT_EQ(redis_command({"GET", key}).substr(0, 2), "10");
}

TEST(Redis, TheCommonPathsPassOnlyTheRecordsTheWholeRuleWould) {
    auto store = fresh_store();
    const std::string id = *store->server_identity();
    ASSERT_EQ(id.size(), 32u);
    const std::string fence_key = store->key_tag() + "fence:f";
    // A record of this identity with a higher token, of an identity that
    // sorts below this one and of one that sorts above it (the identity key
    // is this store's: the whole rule judges each by its token).
    for (const std::string& owner_id : {id, std::string(32, '0'), std::string(32, 'f')}) {
        const std::string planted = owner_id + twenty(50) + " \nplanted";
        EXPECT_EQ(redis_command({"SET", fence_key, planted}), "OK");
        auto w = store->fence_write("f", 49, "lower");
        ASSERT_FALSE(w) << owner_id;
        EXPECT_EQ(w.error(), coord::errc::stale_fence);
        EXPECT_EQ(w.error().highest, 50u);
        EXPECT_EQ(redis_command({"GET", fence_key}), planted);
        // Equal tokens with a sequence: the whole rule, never the common path.
        EXPECT_EQ(redis_command({"SET", fence_key, owner_id + twenty(50) + " 7\nplanted"}), "OK");
        EXPECT_EQ(store->fence_write("f", 50, 7, "same").error(), coord::errc::stale_sequence) << owner_id;
        EXPECT_EQ(store->fence_write("f", 50, 6, "lower").error(), coord::errc::stale_sequence) << owner_id;
        EXPECT_TRUE(store->fence_write("f", 50, 8, "next")) << owner_id;
        EXPECT_TRUE(store->fence_write("f", 51, "above")) << owner_id;
        EXPECT_EQ(store->fence_read("f")->value, "above");
        EXPECT_EQ(store->fence_read("f")->fence, 51u);
    }
    // A token whose digits are a prefix of the other's (1 and 10): widths are
    // fixed. Tokens from 10^19 (a first digit that is not 0) on both sides.
    ASSERT_TRUE(store->fence_write("g", 10, "ten"));
    EXPECT_EQ(store->fence_write("g", 1, "one").error(), coord::errc::stale_fence);
    EXPECT_TRUE(store->fence_write("g", 11, "eleven"));
    const std::uint64_t e19 = 10'000'000'000'000'000'000ULL;
    EXPECT_TRUE(store->fence_write("g", e19 + 1, "e19+1"));
    EXPECT_EQ(store->fence_write("g", e19, "e19").error(), coord::errc::stale_fence);
    EXPECT_EQ(store->fence_write("g", 12, "twelve").error(), coord::errc::stale_fence);
    EXPECT_TRUE(store->fence_write("g", e19 + 2, "e19+2"));
    EXPECT_EQ(store->fence_read("g")->value, "e19+2");
    // Records of the earlier layout (a space between identity and token, and
    // in the lease's head) are not records: refused, never overwritten.
    const std::string legacy_fence = id + " 1000 \nold";
    EXPECT_EQ(redis_command({"SET", fence_key, legacy_fence}), "OK");
    EXPECT_EQ(store->fence_write("f", 5, "x").error(), coord::errc::state_corrupt);
    EXPECT_EQ(store->fence_write("f", 5000, "x").error(), coord::errc::state_corrupt);
    EXPECT_EQ(redis_command({"GET", fence_key}), legacy_fence);
    // An identity key of another shape is refused, not used.
    {
        auto odd = fresh_store();
        EXPECT_EQ(redis_command({"SET", odd->key_tag() + "identity", "not-hex"}), "OK");
        coord::redis::store reopened{redis_url(), {}, odd->opts()};
        auto f = reopened.fence_write("k", 1, "v");
        ASSERT_FALSE(f);
        EXPECT_EQ(f.error(), coord::errc::state_corrupt) << f.error().code.message();
    }

    // Leases: the release's record must be the holder's exactly: an owner
    // that is a prefix of the holder, the holder a prefix of the owner, a
    // holder with a newline and what looks like a term in it, a token whose
    // digits are a prefix of the holder's.
    auto l = store->lease_acquire("n", "AB", 1h);
    ASSERT_TRUE(l);
    EXPECT_EQ(store->lease_release("n", "A", l->token).error(), coord::errc::not_lease_holder);
    EXPECT_EQ(store->lease_release("n", "ABC", l->token).error(), coord::errc::not_lease_holder);
    EXPECT_EQ(store->lease_release("n", "", l->token).error(), coord::errc::not_lease_holder);
    EXPECT_EQ(store->lease_release("n", "AB", l->token / 10).error(), coord::errc::not_lease_holder);
    ASSERT_TRUE(store->lease_release("n", "AB", l->token));
    const std::string tricky = "A 1 2\n3 B ";
    l = store->lease_acquire("n", tricky, 1h);
    ASSERT_TRUE(l);
    EXPECT_EQ(store->lease_read("n")->value().owner, tricky);
    EXPECT_EQ(store->lease_release("n", "A", l->token).error(), coord::errc::not_lease_holder);
    EXPECT_EQ(store->lease_release("n", "3 B ", l->token).error(), coord::errc::not_lease_holder);
    ASSERT_TRUE(store->lease_release("n", tricky, l->token));
    EXPECT_FALSE(*store->lease_read("n"));
    // A holder that holds another release's whole argument (token 5, owner "A").
    const std::string inside = "0" + twenty(5) + " 1\nA ";
    l = store->lease_acquire("n", inside, 1h);
    ASSERT_TRUE(l);
    EXPECT_EQ(store->lease_release("n", "A", 5).error(), coord::errc::not_lease_holder);
    EXPECT_EQ(store->lease_read("n")->value().owner, inside);
    ASSERT_TRUE(store->lease_release("n", inside, l->token));
    // An acquire over a released record whose last token is above the
    // server's clock, and over one that someone joined the line of (w '1'):
    // the whole rule, tokens continuing from the record.
    const std::string lease_key = store->key_tag() + "lease:n";
    const std::uint64_t ahead = 9'000'000'000'000'000'000ULL;
    EXPECT_EQ(redis_command({"SET", lease_key, "00" + twenty(ahead) + " 0\n "}), "OK");
    l = store->lease_acquire("n", "C", 1h);
    ASSERT_TRUE(l);
    EXPECT_EQ(l->token, ahead + 1);
    ASSERT_TRUE(store->lease_release("n", "C", l->token));
    EXPECT_EQ(redis_command({"SET", lease_key, "01" + twenty(ahead + 5) + " 0\n "}), "OK");
    l = store->lease_acquire("n", "D", 1h);
    ASSERT_TRUE(l);
    EXPECT_EQ(l->token, ahead + 6);
    // Keys that sort below every record, and records of the earlier layout
    // (released, and held by "A" with token 42): not a lease, nothing changed.
    EXPECT_EQ(redis_command({"SET", lease_key, "10 42 1 1\nA"}), "OK");
    EXPECT_EQ(store->lease_release("n", "A", 42).error(), coord::errc::state_corrupt);
    EXPECT_EQ(redis_command({"GET", lease_key}), "10 42 1 1\nA");
    for (const std::string low : {"0", "00", "0 1", "000", "00 42 0 0\n"}) {
        EXPECT_EQ(redis_command({"SET", lease_key, low}), "OK");
        auto g = store->lease_acquire("n", "G", 1h);
        ASSERT_FALSE(g) << low;
        EXPECT_EQ(g.error(), coord::errc::state_corrupt) << low;
        EXPECT_EQ(redis_command({"GET", lease_key}), low);
    }
    // A held record is never granted over, whatever its token.
    EXPECT_EQ(redis_command({"SET", lease_key, "10" + twenty(1) + " 1\nE 3600000000000 " + std::to_string(l->expires_at.count())}), "OK");
    auto held = store->lease_acquire("n", "F", 1h);
    ASSERT_FALSE(held);
    EXPECT_EQ(held.error(), coord::errc::lease_held);
    EXPECT_EQ(held.error().holder, "E");
    EXPECT_EQ(held.error().token, 1u);
}

TEST(Redis, ScriptsAreLoadedAgainAfterTheServerForgetsThem) {
    auto store = fresh_store();
    ASSERT_TRUE(store->fence_write("k", 1, "a"));
    EXPECT_EQ(redis_command({"SCRIPT", "FLUSH"}), "OK");
    ASSERT_TRUE(store->fence_write("k", 2, "b")) << "NOSCRIPT must fall back to loading the script";
    auto l = store->lease_acquire("n", "A", 1h);
    ASSERT_TRUE(l);
    EXPECT_EQ(store->fence_read("k")->value, "b");
    auto echo = store->echo(std::string("bin\0ary", 7));
    ASSERT_TRUE(echo);
    EXPECT_EQ(*echo, std::string("bin\0ary", 7));
}

TEST(Redis, EveryKeyOfAStoreSharesItsHashTag) {
    const std::string prefix = redis_fresh_prefix();
    auto store = fresh_store(prefix);
    const std::string odd("n{a}\0b:c", 8);  // braces and a NUL in a name do not move the key's slot
    ASSERT_TRUE(store->fence_write(odd, 1, "v"));
    ASSERT_TRUE(store->lease_acquire(odd, "A", 1h));
    ASSERT_TRUE(store->lease_enqueue(odd, "B", 2s));
    ASSERT_TRUE(store->time_reserve(odd, 5, 1));
    ASSERT_TRUE(store->segment_allocate(odd, 10));
    coord::basic_job_ledger<coord::redis::store> ledger{*store};
    ASSERT_TRUE(ledger.run(coord::slot("job", std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now())),
                           "w", "", [](const coord::ledger_context&) { return std::string("r"); }));
    ASSERT_TRUE(store->session_create("h", {.user = odd, .data = "d", .idle_timeout_ms = 60000, .absolute_timeout_ms = 600000}));
    ASSERT_TRUE(store->revoke_token(odd, 2000000000));
    ASSERT_TRUE(store->revoke_subject(odd, 5));
    // Every key the store made starts with its one tag, "{prefix}:".
    const std::string keys = redis_command({"EVAL", "return table.concat(redis.call('KEYS', ARGV[1]), '\\n')", "0", "*"});
    std::size_t mine = 0;
    std::size_t start = 0;
    while (start <= keys.size()) {
        const auto end = std::min(keys.find('\n', start), keys.size());
        const std::string k = keys.substr(start, end - start);
        if (k.find(prefix) != std::string::npos) {
            ++mine;
            EXPECT_EQ(k.rfind("{" + prefix + "}:", 0), 0u) << k;
        }
        start = end + 1;
    }
    EXPECT_GE(mine, 10u);
}

TEST(Redis, AStoreNotInitializedRefusesWhatNeedsItsDataAndServesLeasesAndSessions) {
    coord::redis::store store{redis_url(), {}, redis_options(redis_fresh_prefix())};
    auto f = store.fence_write("k", 1, "v");
    ASSERT_FALSE(f);
    EXPECT_EQ(f.error(), coord::errc::store_uninitialized);
    EXPECT_EQ(f.error().code, coord::condition::corrupt_state);
    // The refusal names what may be lost and the safe procedure: floors above what was handed out.
    const auto words = f.error().code.message();
    EXPECT_NE(words.find("segment counters"), std::string::npos) << words;
    EXPECT_NE(words.find("--segment-floor N (at least the largest segment ID"), std::string::npos) << words;
    EXPECT_EQ(store.segment_allocate("ids", 10).error(), coord::errc::store_uninitialized);
    EXPECT_EQ(store.time_reserve("node", 10, 1).error(), coord::errc::store_uninitialized);
    EXPECT_EQ(store.revoke_token("jti", 10).error(), coord::errc::store_uninitialized);
    EXPECT_EQ(store.token_revoked("jti", "", std::nullopt, 1).error(), coord::errc::store_uninitialized);
    coord::ledger_claim_request q;
    q.key = "job@x";
    q.worker = "w";
    q.lease_ttl = std::chrono::nanoseconds(1'000'000'000);
    q.replay_window = std::chrono::milliseconds(std::numeric_limits<std::int64_t>::max());
    EXPECT_EQ(store.ledger_claim(q).error(), coord::errc::store_uninitialized);
    EXPECT_TRUE(store.lease_acquire("n", "A", 1h));
    EXPECT_TRUE(store.session_create("h", {.user = "u", .data = "d", .idle_timeout_ms = 1000, .absolute_timeout_ms = 2000}));
    // Initializing once works; again is refused; --force replaces the identity.
    auto id = store.initialize(coord::redis::initial_floors{});
    ASSERT_TRUE(id) << id.error().message();
    EXPECT_EQ(id->size(), 32u);
    EXPECT_TRUE(store.fence_write("k", 1, "v"));
    EXPECT_TRUE(store.fence_write("kept", 1, "a"));
    EXPECT_EQ(store.initialize(coord::redis::initial_floors{}).error(), coord::errc::store_already_initialized);
    coord::redis::store other{redis_url(), {}, store.opts()};
    auto forced = other.initialize(coord::redis::initial_floors{}, true);
    ASSERT_TRUE(forced);
    EXPECT_NE(*forced, *id);
    // A process that opened the store before is refused wherever the data
    // it meets is not its own: a record the new identity wrote, a record
    // that is missing, a counter that starts anew.
    EXPECT_TRUE(other.fence_write("k", 2, "w"));
    EXPECT_EQ(store.fence_write("k", 3, "x").error(), coord::errc::store_identity_changed);
    EXPECT_EQ(store.fence_write("new", 1, "x").error(), coord::errc::store_identity_changed);
    EXPECT_EQ(store.fence_read("new").error(), coord::errc::store_identity_changed);
    EXPECT_EQ(store.segment_allocate("new", 10).error(), coord::errc::store_identity_changed);
    EXPECT_EQ(other.fence_read("k")->value, "w");
    EXPECT_FALSE(other.fence_read("new")->written) << "a refused write must leave no record";
    EXPECT_EQ(other.segment_allocate("new", 10)->begin, 1u) << "a refused allocation must take its increment back";
    // A record it wrote that survived the re-initialization untouched still
    // judges every write by its own fence (the data was kept).
    EXPECT_TRUE(store.fence_write("kept", 2, "b"));
    EXPECT_EQ(store.fence_write("kept", 0, "c").error(), coord::errc::stale_fence);
    EXPECT_EQ(other.fence_read("kept")->value, "b");
    EXPECT_EQ(*other.server_identity(), *forced);
}

// appendonly yes, appendfsync always: a SIGKILL loses nothing acknowledged.
TEST(Redis, ASigkilledServerRestartsWithEveryFenceRangeAndResult) {
    auto store = fresh_store();
    ASSERT_TRUE(store->fence_write("orders", 42, "forty-two"));
    auto range = store->segment_allocate("ids", 100);
    ASSERT_TRUE(range);
    coord::basic_job_ledger<coord::redis::store> ledger{*store};
    const coord::slot s("billing", std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
    auto done = ledger.run(s, "w1", "", [](const coord::ledger_context&) { return std::string("charged once"); });
    ASSERT_TRUE(done);
    auto l = store->lease_acquire("primary", "A", 1h);
    ASSERT_TRUE(l);

    run("kill");

    auto v = until_answered([&] { return store->fence_read("orders"); });
    ASSERT_TRUE(v) << v.error().message();
    EXPECT_EQ(v->fence, 42u);
    EXPECT_EQ(v->value, "forty-two");
    EXPECT_EQ(store->fence_write("orders", 41, "stale").error(), coord::errc::stale_fence);
    auto next = store->segment_allocate("ids", 100);
    ASSERT_TRUE(next) << next.error().message();
    EXPECT_EQ(next->begin, range->end);
    auto again = ledger.run(s, "w2", "", [](const coord::ledger_context&) {
        ADD_FAILURE() << "a done slot ran twice";
        return std::string("twice");
    });
    ASSERT_TRUE(again);
    EXPECT_EQ(again->kind, coord::run_outcome::replayed);
    EXPECT_EQ(again->result, "charged once");
    auto holder = store->lease_read("primary");
    ASSERT_TRUE(holder && *holder);
    EXPECT_EQ((*holder)->token, l->token);
}

// An older copy of the data directory put back (the append-only file's
// manifest, its RDB-format base and its increments, copied while the server
// ran): the identity key is in the copy, so only the store's generation can
// tell. A store object that saw the later state refuses every call that
// needs the data (state_went_back), reads too, and keeps refusing after other
// clients raised the generation again; leases still grant tokens above every
// earlier one. The README's recovery (store init --force with floors) then
// hands nothing out twice.
TEST(Redis, AnOlderAppendOnlyFilePutBackIsRefusedAndItsRecoveryHandsNothingOutTwice) {
    const std::string prefix = redis_fresh_prefix();
    auto store = fresh_store(prefix);
    const auto q = coord::test::old_slot_claim("job@1");
    auto a = store->lease_acquire("orders-writer", "A", 1h);
    ASSERT_TRUE(a);
    ASSERT_TRUE(store->fence_write("orders", a->token, "by A"));
    ASSERT_TRUE(store->segment_allocate("ids", 10));
    ASSERT_TRUE(store->lease_release("orders-writer", "A", a->token));
    const auto running = coord::test::old_slot_claim("job@0");  // claimed before the copy, done after
    auto r0 = store->ledger_claim(running);
    ASSERT_TRUE(r0 && r0->kind == coord::claim_outcome::granted);

    run("copy");

    ASSERT_TRUE(store->ledger_complete(running.key, r0->fence, "charged", 24h));

    auto b = store->lease_acquire("orders-writer", "B", 1h);
    ASSERT_TRUE(b);
    ASSERT_TRUE(store->fence_write("orders", b->token, "by B"));
    auto ids = store->segment_allocate("ids", 10);
    ASSERT_TRUE(ids);
    auto c = store->ledger_claim(q);
    ASSERT_TRUE(c && c->kind == coord::claim_outcome::granted);
    ASSERT_TRUE(store->ledger_complete(q.key, c->fence, "charged", 24h));
    ASSERT_TRUE(store->revoke_token("stolen", 4000000000));

    run("rollback");

    // A, paused through all of it, writes with its old token: on the older
    // state the fence's record is A's own.
    auto late = until_answered([&] { return store->fence_write("orders", a->token, "late A"); });
    ASSERT_FALSE(late) << "A's token " << a->token << " accepted after B's " << b->token;
    EXPECT_EQ(late.error(), coord::errc::state_went_back) << late.error().code.message();
    EXPECT_EQ(late.error(), coord::condition::corrupt_state);
    EXPECT_NE(late.error().code.message().find("store init"), std::string::npos) << late.error().code.message();
    EXPECT_EQ(store->fence_read("orders").error(), coord::errc::state_went_back);
    auto again = store->segment_allocate("ids", 10);
    ASSERT_FALSE(again) << "handed out " << again->begin << " again";
    EXPECT_EQ(again.error(), coord::errc::state_went_back);
    EXPECT_EQ(store->ledger_claim(q).error(), coord::errc::state_went_back);
    EXPECT_EQ(store->token_revoked("stolen", "", std::nullopt, 1).error(), coord::errc::state_went_back);
    // Leases need none of the lost data: a new token is above B's.
    auto d = store->lease_acquire("orders-writer", "D", 1h);
    ASSERT_TRUE(d) << d.error().code.message();
    EXPECT_GT(d->token, b->token);
    // Other clients' calls raise the generation past what this one saw; it
    // still refuses (they bring nothing back).
    coord::redis::store other{redis_url(), {}, redis_options(prefix)};
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(other.segment_allocate("other", 1));
    EXPECT_EQ(store->segment_allocate("ids", 10).error(), coord::errc::state_went_back);

    // The recovery: floors above what was handed out, the store initialized
    // again (what `coordctl store init --force` runs), every process reopens.
    coord::redis::store fresh{redis_url(), {}, redis_options(prefix)};
    coord::redis::initial_floors floors;
    floors.segment = ids->end - 1;
    floors.fence_now = true;
    floors.ledger_now = true;
    floors.reservation_now = true;
    ASSERT_EQ(fresh.initialize(floors).error(), coord::errc::store_already_initialized);
    ASSERT_TRUE(fresh.initialize(floors, /*replace=*/true));
    const coord::fence_token e_token_floor = b->token + 1;
    EXPECT_EQ(store->segment_allocate("ids", 10).error(), coord::errc::state_went_back);
    EXPECT_EQ(other.fence_write("a key the copy never had", e_token_floor, "x").error(), coord::errc::store_identity_changed);
    auto stale = fresh.fence_write("orders", b->token, "late B");
    ASSERT_FALSE(stale) << "B's token " << b->token << " accepted after the recovery";
    EXPECT_EQ(stale.error(), coord::errc::stale_fence);
    auto next = fresh.segment_allocate("ids", 10);
    ASSERT_TRUE(next) << next.error().message();
    EXPECT_GE(next->begin, ids->end) << "a segment ID handed out again";
    auto done = fresh.ledger_claim(q);
    ASSERT_TRUE(done) << done.error().message();
    EXPECT_EQ(done->kind, coord::claim_outcome::expired) << "the slot done before the rollback runs again";
    auto was_running = fresh.ledger_claim(running);
    ASSERT_TRUE(was_running) << was_running.error().message();
    EXPECT_EQ(was_running->kind, coord::claim_outcome::expired) << "a slot the older state shows running runs again";
    int ran = 0;
    coord::basic_job_ledger<coord::redis::store> ledger{fresh};
    const coord::slot s("billing", std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()) - 1h);
    auto rerun = ledger.run(s, "w", "", [&](const coord::ledger_context&) {
        ++ran;
        return std::string("charged again");
    });
    ASSERT_TRUE(rerun) << rerun.error().message();
    EXPECT_EQ(rerun->kind, coord::run_outcome::expired);
    EXPECT_EQ(ran, 0);
    ASSERT_TRUE(fresh.lease_release("orders-writer", "D", d->token));
    auto e = fresh.lease_acquire("orders-writer", "E", 1h);
    ASSERT_TRUE(e);
    EXPECT_TRUE(fresh.fence_write("orders", e->token, "by E")) << "a lease granted after the recovery passes the floor";
}

// A restart that lost everything (no persistence, or a replica without the
// writes promoted): tokens still go up; what needs the lost data refuses
// until an operator initializes again; a rollback under a surviving identity
// is caught by the segment allocator's own memory.
TEST(Redis, AServerThatLostItsDataRefusesInsteadOfReissuing) {
    const std::string prefix = redis_fresh_prefix();
    auto store = fresh_store(prefix);
    ASSERT_TRUE(store->fence_write("orders", 42, "v"));
    auto range = store->segment_allocate("ids", 100);
    ASSERT_TRUE(range);
    coord::basic_job_ledger<coord::redis::store> ledger{*store};
    const coord::slot s("billing", std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
    ASSERT_TRUE(ledger.run(s, "w1", "", [](const coord::ledger_context&) { return std::string("charged"); }));
    auto before = store->lease_acquire("primary", "A", 1h);
    ASSERT_TRUE(before);
    ASSERT_TRUE(store->revoke_token("stolen", 4000000000));

    run("lose");

    auto seg = until_answered([&] { return store->segment_allocate("ids", 100); });
    ASSERT_FALSE(seg);
    EXPECT_EQ(seg.error(), coord::errc::store_uninitialized) << seg.error().message();
    EXPECT_EQ(store->fence_write("orders", 1, "stale").error(), coord::errc::store_uninitialized);
    EXPECT_EQ(store->time_reserve("node", 10, 1).error(), coord::errc::store_uninitialized);
    EXPECT_EQ(store->token_revoked("stolen", "", std::nullopt, 1).error(), coord::errc::store_uninitialized);
    int ran = 0;
    auto claim = ledger.run(s, "w2", "", [&](const coord::ledger_context&) {
        ++ran;
        return std::string("charged again");
    });
    ASSERT_FALSE(claim);
    EXPECT_EQ(claim.error(), coord::errc::store_uninitialized);
    EXPECT_EQ(ran, 0);
    // The lease's record is gone, yet the next token is larger than the last.
    auto after = store->lease_acquire("primary", "B", 1h);
    ASSERT_TRUE(after) << after.error().code.message();
    EXPECT_GT(after->token, before->token);

    // The operator follows the README's procedure: initialize again, stating
    // floors above what the store handed out (the largest segment ID, the
    // fence floor at the server's now, slots up to now not run again,
    // reservations restarting at the server's now).
    // Processes that opened it before stay refused; nothing is handed out twice.
    coord::redis::store fresh{redis_url(), {}, redis_options(prefix)};
    coord::redis::initial_floors floors;
    floors.segment = range->end - 1;
    floors.fence_now = true;
    floors.ledger_now = true;
    floors.reservation_now = true;
    ASSERT_TRUE(fresh.initialize(floors));
    EXPECT_EQ(store->segment_allocate("ids", 100).error(), coord::errc::store_identity_changed);
    auto restarted = fresh.segment_allocate("ids", 100);
    ASSERT_TRUE(restarted);
    EXPECT_EQ(restarted->begin, range->end) << "segment IDs continue above the floor";
    auto other_tag = fresh.segment_allocate("other", 10);
    ASSERT_TRUE(other_tag);
    EXPECT_EQ(other_tag->begin, range->end) << "every tag whose counter is missing continues above the floor";
    auto old_fence = fresh.fence_write("orders", 42, "late");
    ASSERT_FALSE(old_fence);
    EXPECT_EQ(old_fence.error(), coord::errc::stale_fence) << "a token accepted before the loss passes again";
    EXPECT_GT(old_fence.error().highest, before->token) << "the fence floor is above every lease token granted";
    coord::test::expect_ledger_fences_above_the_fence_floor(fresh, before->token);
    EXPECT_GE(fresh.fence_read("orders")->fence, old_fence.error().highest);
    EXPECT_FALSE(fresh.fence_read("orders")->written);
    auto next_holder = fresh.lease_acquire("orders-writer", "C", 1h);
    ASSERT_TRUE(next_holder);
    EXPECT_TRUE(fresh.fence_write("orders", next_holder->token, "new holder")) << "a lease granted now passes the floor";
    coord::basic_job_ledger<coord::redis::store> fresh_ledger{fresh};
    auto rerun = fresh_ledger.run(s, "w3", "", [&](const coord::ledger_context&) {
        ++ran;
        return std::string("charged again");
    });
    ASSERT_TRUE(rerun) << rerun.error().message();
    EXPECT_EQ(rerun->kind, coord::run_outcome::expired) << "a slot before the ledger floor ran again";
    EXPECT_EQ(ran, 0);
    auto reserved = fresh.time_reserve("node", 10, 1);
    ASSERT_TRUE(reserved);
    EXPECT_GT(*reserved, 10) << "a lost reservation restarts at the reservation floor, not at the caller's";
    // A counter that goes back under the same identity (a restored snapshot)
    // is caught by a store object that already got a later range.
    EXPECT_EQ(redis_command({"SET", fresh.key_tag() + "segment:ids", "0"}), "OK");
    auto back = fresh.segment_allocate("ids", 100);
    ASSERT_FALSE(back);
    EXPECT_EQ(back.error(), coord::errc::state_went_back);
    EXPECT_EQ(back.error(), coord::condition::corrupt_state);
}

TEST(Redis, ARefusedConnectionIsAClearErrorAndAMalformedUrlIsRefused) {
    // A port nobody listens on.
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    socklen_t len = sizeof addr;
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    const std::string url = "redis://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    ::close(fd);
    try {
        coord::redis::store store{url};
        ADD_FAILURE() << "connected to a closed port";
    } catch (const coord::store_error& e) {
        EXPECT_EQ(e.code(), coord::redis::errc::connection_failed) << e.what();
        EXPECT_EQ(e.code(), coord::condition::unavailable);
        EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos) << e.what();
    }
    for (const char* bad : {"http://x:1", "redis://", "redis://h:0", "redis://h:70000", "redis://h:1/16", "redis://h:1/x",
                            "redis://u:p@h:1", "redis://[::1"})
        EXPECT_THROW(coord::redis::store{bad}, std::invalid_argument) << bad;
    auto with = [](auto change) {
        coord::redis::options o;
        change(o);
        return o;
    };
    EXPECT_THROW((coord::redis::store{redis_url(), {}, with([](auto& o) { o.prefix = "a{b"; })}), std::invalid_argument);
    EXPECT_THROW((coord::redis::store{redis_url(), {}, with([](auto& o) { o.prefix = ""; })}), std::invalid_argument);
    EXPECT_THROW((coord::redis::store{redis_url(), {}, with([](auto& o) { o.pool_size = 0; })}), std::invalid_argument);
    EXPECT_THROW((coord::redis::store{redis_url(), {}, with([](auto& o) { o.operation_timeout = 0ms; })}),
                 std::invalid_argument);
    EXPECT_THROW((coord::redis::store{redis_url(), {}, with([](auto& o) { o.connect_timeout = 25h; })}),
                 std::invalid_argument);
    const auto ok = coord::redis::parse_url("redis://[::1]:6380/3");
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->host, "::1");
    EXPECT_EQ(ok->port, 6380);
    EXPECT_EQ(ok->db, 3);
}

// A second server of the test's own, on its own port and directory.
class side_server {
public:
    explicit side_server(const std::string& extra) : port_(std::stoi(COORD_REDIS_PORT) + 1) {
        dir_ = std::string(COORD_REDIS_DIR) + "-side";
        std::filesystem::remove_all(dir_);
        std::filesystem::create_directories(dir_);
        start(extra);
    }
    ~side_server() {
        stop();
        std::filesystem::remove_all(dir_);
        std::filesystem::remove(dir_ + ".log");
    }
    void start(const std::string& extra) {
        const std::string cmd = "redis-server --bind 127.0.0.1 --port " + std::to_string(port_) + " --dir '" + dir_ +
                                "' --logfile '" + dir_ + ".log' --daemonize yes --pidfile '" + dir_ + ".pid' " + extra;
        EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
        // Up once it answers, even if only to say it is still loading.
        for (int i = 0; i < 400 && std::system(cli("ping 2>&1 | grep -q -e PONG -e LOADING").c_str()) != 0; ++i)
            std::this_thread::sleep_for(10ms);
    }
    void stop() {
        (void)std::system(cli("shutdown nosave >/dev/null 2>&1").c_str());
        const std::string pid = "$(cat '" + dir_ + ".pid' 2>/dev/null)";
        for (int i = 0; i < 400 && std::system(("kill -0 " + pid + " 2>/dev/null").c_str()) == 0; ++i)
            std::this_thread::sleep_for(10ms);
        (void)std::system(("kill -KILL " + pid + " 2>/dev/null; rm -f '" + dir_ + ".pid'").c_str());
        for (int i = 0; i < 400 && std::system(cli("ping >/dev/null 2>&1").c_str()) == 0; ++i)
            std::this_thread::sleep_for(10ms);
    }
    std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
    std::string cli(const std::string& args) const { return "redis-cli -p " + std::to_string(port_) + " " + args; }
    const std::string& dir() const { return dir_; }

private:
    int port_;
    std::string dir_;
};

TEST(Redis, TheServersRefusalsMapToTheirConditions) {
    {
        // MISCONF: the server cannot save (its directory vanished) and stops writes.
        side_server side("--save '3600 1' --appendonly no");
        coord::redis::store store{side.url(), {}, redis_options("misconf")};
        ASSERT_TRUE(store.initialize(coord::redis::initial_floors{}));
        ASSERT_TRUE(store.fence_write("k", 1, "v"));
        std::filesystem::remove_all(side.dir());
        ASSERT_EQ(std::system(side.cli("bgsave >/dev/null").c_str()), 0);
        coord::result<void, coord::write_error> w;
        coord::fence_token token = 1;
        for (int i = 0; i < 200; ++i) {  // the failed save is noticed within moments
            w = store.fence_write("k", ++token, "w");
            if (!w) break;
            std::this_thread::sleep_for(10ms);
        }
        ASSERT_FALSE(w);
        EXPECT_EQ(w.error().code, coord::redis::errc::misconfigured) << w.error().code.message();
        EXPECT_EQ(w.error().code, coord::condition::unavailable);
        EXPECT_NE(w.error().code.message().find("MISCONF"), std::string::npos) << w.error().code.message();
        auto r = store.fence_read("k");  // reads still work, and say the refused write did nothing
        ASSERT_TRUE(r);
        EXPECT_EQ(r->fence, token - 1);
        std::filesystem::create_directories(side.dir());
    }
    {
        // READONLY: a replica refuses writes.
        side_server side(std::string("--appendonly no --replicaof 127.0.0.1 ") + COORD_REDIS_PORT);
        coord::redis::store store{side.url(), {}, redis_options(redis_fresh_prefix())};
        auto w = store.lease_acquire("n", "A", 1h);
        ASSERT_FALSE(w);
        EXPECT_EQ(w.error().code, coord::redis::errc::read_only) << w.error().code.message();
        EXPECT_EQ(w.error().code, coord::condition::unavailable);
    }
    {
        // LOADING: a server still reading a large data set at start.
        side_server side("--appendonly yes");
        ASSERT_EQ(std::system(side.cli("eval \"for i = 1, 20000 do redis.call('set', 'k' .. i, i) end\" 0 >/dev/null").c_str()), 0);
        ASSERT_EQ(std::system(side.cli("bgrewriteaof >/dev/null").c_str()), 0);
        for (int i = 0; i < 500; ++i) {
            if (std::system(side.cli("info persistence | grep -q 'aof_rewrite_in_progress:0'").c_str()) == 0 &&
                std::system(side.cli("info persistence | grep -q 'aof_rewrite_scheduled:0'").c_str()) == 0)
                break;
            std::this_thread::sleep_for(10ms);
        }
        side.stop();
        // 500 us a key (about 10 s of loading), answering clients every KiB read.
        side.start("--appendonly yes --key-load-delay 500 --loading-process-events-interval-bytes 1024");
        coord::redis::options o;
        o.prefix = "loading";
        try {
            coord::redis::store store{side.url(), {}, o};
            ADD_FAILURE() << "a loading server answered";
        } catch (const coord::store_error& e) {
            EXPECT_EQ(e.code(), coord::redis::errc::loading) << e.what();
            EXPECT_EQ(e.code(), coord::condition::unavailable);
        }
    }
}

coord::redis::options short_timeouts() {
    coord::redis::options o;
    o.prefix = redis_fresh_prefix();
    o.operation_timeout = 300ms;
    o.connect_timeout = 300ms;
    return o;
}

template <class F>
std::chrono::steady_clock::duration timed(F f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    return std::chrono::steady_clock::now() - start;
}

// The server paused (SIGSTOP) while clients call: no false success, a write
// is outcome_unknown when it was sent, a read or a call not sent is deadline_passed, each in bounded time; after
// SIGCONT the next call reconnects and the state is one the rule allows.
TEST(Redis, APausedServerGivesUnknownOrUnavailableInBoundedTimeNeverASuccess) {
    auto store = std::make_unique<coord::redis::store>(redis_url(), coord::redis::server_clock{}, short_timeouts());
    ASSERT_TRUE(store->initialize(coord::redis::initial_floors{}));
    ASSERT_TRUE(store->fence_write("k", 5, "five"));
    auto held = store->lease_acquire("n", "A", 1h);
    ASSERT_TRUE(held);
    auto first = store->segment_allocate("ids", 10);
    ASSERT_TRUE(first);
    run("pause");
    coord::result<void, coord::write_error> w;
    coord::result<coord::lease, coord::lease_error> l;
    coord::result<coord::segment_range> seg;
    coord::result<coord::fenced_value> r;
    const auto took = timed([&] {
        w = store->fence_write("k", 6, "six");
        l = store->lease_acquire("other", "B", 1h);
        seg = store->segment_allocate("ids", 10);
        r = store->fence_read("k");
    });
    run("resume");
    EXPECT_LT(took, 4 * 300ms + 2s);  // a hang guard, not a speed claim
    // The write went out on the open connection: unknown. The connection is
    // then dropped, and a new one is checked (PING) before a call is sent on
    // it: the next calls were surely not applied, and say so.
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error().code, coord::errc::outcome_unknown) << w.error().code.message();
    ASSERT_FALSE(l);
    EXPECT_EQ(l.error().code, coord::redis::errc::deadline_passed) << l.error().code.message();
    ASSERT_FALSE(seg);
    EXPECT_EQ(seg.error(), coord::redis::errc::deadline_passed) << seg.error().message();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), coord::redis::errc::deadline_passed) << r.error().message();
    EXPECT_EQ(r.error(), coord::condition::unavailable);
    // Resolved: the write either landed or not, and the fence holds.
    auto v = until_answered([&] { return store->fence_read("k"); });
    ASSERT_TRUE(v);
    EXPECT_TRUE(v->fence == 5 || v->fence == 6) << v->fence;
    EXPECT_EQ(store->fence_write("k", 4, "stale").error(), coord::errc::stale_fence);
    // No range is served twice: the one lost in the pause is skipped.
    auto after = store->segment_allocate("ids", 10);
    ASSERT_TRUE(after);
    EXPECT_GE(after->begin, first->end);
}

TEST(Redis, APortThatNeverAnswersTimesOut) {
    const coord::test::silent_port silent;
    const std::string url = "redis://" + silent.address();
    const auto took = timed([&] {
        try {
            coord::redis::store store{url, {}, short_timeouts()};
            ADD_FAILURE() << "a port that never answers answered";
        } catch (const coord::store_error& e) {
            EXPECT_EQ(e.code(), coord::redis::errc::deadline_passed) << e.what();
        }
    });
    EXPECT_LT(took, 300ms + 2s);
}

TEST(Redis, ManyThreadsOnAFewConnectionsKeepEveryPromise) {
    coord::redis::options o;
    o.pool_size = 2;
    auto store = fresh_store(redis_fresh_prefix(), o);
    std::vector<std::thread> threads;
    std::vector<std::vector<std::uint64_t>> got(8);
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 50; ++i) {
                auto r = store->segment_allocate("ids", 3);
                if (r) got[static_cast<std::size_t>(t)].push_back(r->begin);
            }
        });
    for (auto& t : threads) t.join();
    std::set<std::uint64_t> all;
    for (const auto& g : got)
        for (auto b : g) EXPECT_TRUE(all.insert(b).second);
    EXPECT_EQ(all.size(), 400u);
}

}  // namespace
