// SPDX-License-Identifier: Apache-2.0
// Opaque server-side sessions (coord/session.hpp) on the memory store with a
// manual clock, and the Set-Cookie builder.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "coord/session.hpp"
#include "coord/aliases.hpp"
#include "coord/storage/memory.hpp"

namespace {

using namespace std::chrono_literals;
using coord::errc;

using store_type = coord::basic_memory_store<coord::manual_clock>;
using manager = coord::basic_session_manager<store_type>;

struct fixture {
    coord::manual_clock clock{std::chrono::sys_time<std::chrono::seconds>(std::chrono::seconds(1'700'000'000))};
    store_type store{clock};
    manager sessions{store, {.idle_timeout = 30min, .absolute_timeout = 8h}};
};

TEST(Session, CreateAndLoad) {
    fixture f;
    auto s = f.sessions.create("alice", "cart=1");
    ASSERT_TRUE(s);
    EXPECT_EQ(s->id.size(), 43u);  // 256 bits, base64url
    auto again = f.sessions.load(s->id);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->user, "alice");
    EXPECT_EQ(again->data, "cart=1");
    EXPECT_EQ(again->version, s->version);
    auto other = f.sessions.create("alice");
    ASSERT_TRUE(other);
    EXPECT_NE(other->id, s->id);
}

TEST(Session, TheStoreKeepsOnlyTheHashOfTheId) {
    fixture f;
    auto s = f.sessions.create("alice");
    ASSERT_TRUE(s);
    EXPECT_EQ(f.store.session_load(s->id).error(), errc::session_not_found);
    EXPECT_TRUE(f.store.session_load(manager::hash(s->id)));
    EXPECT_EQ(manager::hash(s->id).size(), 64u);
}

TEST(Session, MalformedIdsAreNotFound) {
    fixture f;
    for (const char* id : {"", "short", "../../etc/passwd", "' OR 1=1 --", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA+"}) {
        EXPECT_EQ(f.sessions.load(id).error(), errc::session_not_found) << id;
    }
    EXPECT_EQ(f.sessions.load(std::string(43, 'A')).error(), errc::session_not_found);
}

TEST(Session, IdleTimeoutAndTheIdleClockMovesOnLoad) {
    fixture f;
    auto s = f.sessions.create("alice");
    ASSERT_TRUE(s);
    f.clock.advance(29min);
    ASSERT_TRUE(f.sessions.load(s->id));  // moves the idle clock
    f.clock.advance(29min);
    ASSERT_TRUE(f.sessions.load(s->id));
    f.clock.advance(30min);
    EXPECT_EQ(f.sessions.load(s->id).error(), errc::session_expired);
    EXPECT_EQ(f.sessions.load(s->id).error(), errc::session_not_found);  // gone once expired
}

TEST(Session, AbsoluteTimeoutEndsABusySession) {
    fixture f;
    auto s = f.sessions.create("alice");
    ASSERT_TRUE(s);
    for (int i = 0; i < 31; ++i) {  // 31 x 15 min = 7 h 45 min
        f.clock.advance(15min);
        ASSERT_TRUE(f.sessions.load(s->id)) << i;
    }
    f.clock.advance(15min);  // 8 h
    EXPECT_EQ(f.sessions.load(s->id).error(), errc::session_expired);
}

TEST(Session, RotateKillsTheOldIdAgainstFixation) {
    fixture f;
    auto s = f.sessions.create("alice");  // e.g. an attacker planted this ID before login
    ASSERT_TRUE(s);
    auto fresh = f.sessions.rotate(*s);  // login: new ID
    ASSERT_TRUE(fresh);
    EXPECT_NE(fresh->id, s->id);
    EXPECT_EQ(f.sessions.load(s->id).error(), errc::session_not_found);
    auto loaded = f.sessions.load(fresh->id);
    ASSERT_TRUE(loaded);
    EXPECT_EQ(loaded->user, "alice");
    EXPECT_EQ(loaded->created, s->created);  // rotation keeps the absolute timeout
    EXPECT_EQ(loaded->absolute_expiry, s->absolute_expiry);
    EXPECT_EQ(f.sessions.rotate(*s).error(), errc::session_not_found);  // the old handle cannot rotate again
}

TEST(Session, ConcurrentModificationIsAConflictNotALostUpdate) {
    fixture f;
    auto s = f.sessions.create("alice", "n=0");
    ASSERT_TRUE(s);
    auto a = f.sessions.load(s->id), b = f.sessions.load(s->id);
    ASSERT_TRUE(a && b);
    a->data = "n=1 (a)";
    b->data = "n=1 (b)";
    ASSERT_TRUE(f.sessions.save(*a));
    EXPECT_EQ(f.sessions.save(*b).error(), errc::session_conflict);
    EXPECT_EQ(f.sessions.load(s->id)->data, "n=1 (a)");
    EXPECT_EQ(f.sessions.rotate(*b).error(), errc::session_conflict);  // stale handles cannot rotate either
    auto b2 = f.sessions.load(s->id);
    b2->data = "n=2 (b)";
    EXPECT_TRUE(f.sessions.save(*b2));
    EXPECT_EQ(f.sessions.load(s->id)->data, "n=2 (b)");
}

TEST(Session, LogoutRacingASaveStaysLoggedOut) {
    fixture f;
    auto s = f.sessions.create("alice");
    ASSERT_TRUE(s);
    auto request = f.sessions.load(s->id);  // a slow request loaded it
    ASSERT_TRUE(request);
    EXPECT_EQ(f.sessions.revoke(s->id), true);  // the user logs out meanwhile
    request->data = "late write";
    EXPECT_EQ(f.sessions.save(*request).error(), errc::session_not_found);  // it cannot resurrect the session
    EXPECT_EQ(f.sessions.load(s->id).error(), errc::session_not_found);
    EXPECT_EQ(f.sessions.revoke(s->id), false);
}

TEST(Session, RevokeAllOfAUser) {
    fixture f;
    std::vector<std::string> alice;
    for (int i = 0; i < 3; ++i) alice.push_back(f.sessions.create("alice")->id);
    const std::string bob = f.sessions.create("bob")->id;
    EXPECT_EQ(f.sessions.revoke_user("alice"), 3u);
    for (const auto& id : alice) EXPECT_EQ(f.sessions.load(id).error(), errc::session_not_found);
    EXPECT_TRUE(f.sessions.load(bob));
}

TEST(Session, ThreadsIncrementingThroughSaveLoseNothing) {
    fixture f;
    auto s = f.sessions.create("alice", "0");
    ASSERT_TRUE(s);
    constexpr int threads = 4, per_thread = 500;
    std::atomic<int> conflicts{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&] {
            for (int i = 0; i < per_thread; ++i) {
                for (;;) {
                    auto cur = f.sessions.load(s->id);
                    if (!cur) return;
                    cur->data = std::to_string(std::stoi(cur->data) + 1);
                    auto ok = f.sessions.save(*cur);
                    if (ok) break;
                    if (ok.error() != errc::session_conflict) return;
                    ++conflicts;
                }
            }
        });
    for (auto& t : pool) t.join();
    EXPECT_EQ(f.sessions.load(s->id)->data, std::to_string(threads * per_thread));
}

// Two service instances share one store; whatever their own clocks say
// (they read none), the store's clock alone decides: a session is live
// until the store's clock passes its idle or absolute end, and the cookie's
// remaining lifetime comes from the store too.
TEST(Session, TwoInstancesAgreeOnTheStoresClock) {
    fixture f;
    manager other{f.store, {.idle_timeout = 30min, .absolute_timeout = 8h}};
    auto s = f.sessions.create("alice");
    ASSERT_TRUE(s);
    EXPECT_EQ(s->created.count(), coord::unix_millis(f.clock.now()));
    EXPECT_EQ(s->remaining, 8h);
    f.clock.advance(20min);
    auto seen = other.load(s->id);
    ASSERT_TRUE(seen);
    EXPECT_EQ(seen->remaining, 8h - 20min);
    f.clock.advance(29min);
    EXPECT_TRUE(f.sessions.load(s->id));  // 29 min after the other instance's load
    f.clock.advance(30min);
    EXPECT_EQ(other.load(s->id).error(), errc::session_expired);
}

// A steady-clock memory store still reports Unix times (mapped once).
TEST(Session, SteadyMemoryStoreReportsUnixTimes) {
    coord::memory_store store;
    coord::session_manager sessions{store};
    auto s = sessions.create("alice");
    ASSERT_TRUE(s);
    const auto now = coord::unix_millis(std::chrono::system_clock::now());
    EXPECT_LE(std::abs(s->created.count() - now), 60'000);
    EXPECT_EQ(s->absolute_expiry - s->created, 12h);
}

TEST(Session, OptionsAreChecked) {
    store_type store{coord::manual_clock{}};
    EXPECT_THROW(manager(store, {.idle_timeout = 0ms, .absolute_timeout = 1h}), std::invalid_argument);
    EXPECT_THROW(manager(store, {.idle_timeout = 2h, .absolute_timeout = 1h}), std::invalid_argument);
    EXPECT_THROW(manager(store, {.idle_timeout = 1h, .absolute_timeout = 24h * 401}), std::invalid_argument);
    EXPECT_THROW(manager(store, {.idle_timeout = std::chrono::milliseconds::max(),
                                 .absolute_timeout = std::chrono::milliseconds::max()}),
                 std::invalid_argument);
    EXPECT_NO_THROW(manager(store, {.idle_timeout = 24h * 400, .absolute_timeout = 24h * 400}));
}

// --- Set-Cookie -------------------------------------------------------------------

TEST(SetCookie, SecureDefaults) {
    EXPECT_EQ(coord::set_cookie("__Host-sid", "abc").path("/").max_age(3600s).str(),
              "__Host-sid=abc; Path=/; Max-Age=3600; Secure; HttpOnly; SameSite=Lax");
    EXPECT_EQ(coord::set_cookie("sid", "abc").site(coord::set_cookie::same_site::strict).str(),
              "sid=abc; Secure; HttpOnly; SameSite=Strict");
    EXPECT_EQ(coord::set_cookie("sid", "").max_age(0s).path("/").str(), "sid=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Lax");
}

TEST(SetCookie, RefusesInsecureCombinations) {
    using ss = coord::set_cookie::same_site;
    EXPECT_THROW(coord::set_cookie("sid", "a").secure(false).site(ss::none).str(), std::invalid_argument);
    EXPECT_NO_THROW(coord::set_cookie("sid", "a").site(ss::none).str());
    EXPECT_THROW(coord::set_cookie("__Secure-sid", "a").secure(false).str(), std::invalid_argument);
    EXPECT_THROW(coord::set_cookie("__Host-sid", "a").secure(false).path("/").str(), std::invalid_argument);
    EXPECT_THROW(coord::set_cookie("__Host-sid", "a").path("/").domain("example.com").str(), std::invalid_argument);
    EXPECT_THROW(coord::set_cookie("__Host-sid", "a").path("/app").str(), std::invalid_argument);
    EXPECT_THROW(coord::set_cookie("__Host-sid", "a").str(), std::invalid_argument);  // Path=/ is required
    EXPECT_THROW(coord::set_cookie("sid", "a").max_age(-1s).str(), std::invalid_argument);
    EXPECT_THROW(coord::set_cookie("sid", "a").max_age(std::chrono::hours(24 * 401)).str(), std::invalid_argument);
}

TEST(SetCookie, RefusesHeaderInjection) {
    EXPECT_THROW(coord::set_cookie("sid", "a; Domain=evil.example").str(), std::invalid_argument);
    EXPECT_THROW(coord::set_cookie("sid", "a\r\nSet-Cookie: x=y").str(), std::invalid_argument);
    EXPECT_THROW(coord::set_cookie("s id", "a").str(), std::invalid_argument);
    EXPECT_THROW(coord::set_cookie("sid=", "a").str(), std::invalid_argument);
    EXPECT_THROW(coord::set_cookie("", "a").str(), std::invalid_argument);
    EXPECT_THROW(coord::set_cookie("sid", "a").path("/;x").str(), std::invalid_argument);
    EXPECT_THROW(coord::set_cookie("sid", "a").path("app").str(), std::invalid_argument);
    EXPECT_THROW(coord::set_cookie("sid", "a").domain("a.example\n").str(), std::invalid_argument);
    EXPECT_THROW(coord::set_cookie("sid", "\"quoted\"").str(), std::invalid_argument);
}

}  // namespace
