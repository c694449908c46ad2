// SPDX-License-Identifier: Apache-2.0
// ZooKeeper-only behaviour on a standalone server: terms judged on the
// ensemble's own stamps, zxid tokens, a renew that lands after the term is
// undone, exact 64-bit fences, the session-bound lease (the negotiated term,
// a repeated acquire recognised as the same grant, the lease gone with its
// session), and clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <future>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>

#include "coord/fence.hpp"
#include "coord/lease.hpp"
#include "support/lease_watch_check.hpp"
#include "support/failover_checks.hpp"
#include "zookeeper/zk_support.hpp"

namespace {

using namespace std::chrono_literals;
using coord::test::zk_fresh_root;
using coord::test::zk_url;

// Waits until the ensemble's clock passes `t` (its stamps judge the terms).
void wait_for_server_time(coord::zookeeper::store& store, std::int64_t t) {
    for (;;) {
        auto now = store.server_now_ns();
        ASSERT_TRUE(now) << now.error().message();
        if (*now > t) return;
        std::this_thread::sleep_for(20ms);
    }
}

// The everyday names on this engine (coord/detail/store_aliases.hpp).
static_assert(std::is_same_v<coord::zookeeper::lease_manager, coord::basic_lease_manager<coord::zookeeper::store>>);
static_assert(std::is_same_v<coord::zookeeper::fenced_resource, coord::basic_fenced_resource<coord::zookeeper::store>>);
static_assert(std::is_same_v<coord::zookeeper::snowflake,
                             coord::basic_snowflake<coord::default_layout, coord::system_clock, coord::zookeeper::store>>);
static_assert(std::is_same_v<coord::zookeeper::segment_generator, coord::basic_segment_generator<coord::zookeeper::store>>);
static_assert(std::is_same_v<coord::zookeeper::job_ledger, coord::basic_job_ledger<coord::zookeeper::store>>);

TEST(ZooKeeper, TermsAreJudgedOnTheEnsemblesStampsAndTokensAreZxids) {
    const std::string url = zk_fresh_root(zk_url());
    coord::zookeeper::store store{url};
    const auto before = store.server_now_ns();
    ASSERT_TRUE(before) << before.error().message();
    auto l = store.lease_acquire("primary", "A", 1h);
    ASSERT_TRUE(l) << l.error().code.message();
    const auto after = store.server_now_ns();
    ASSERT_TRUE(after);
    EXPECT_GE(l->expires_at.count(), *before + std::chrono::nanoseconds(1h).count());
    EXPECT_LE(l->expires_at.count(), *after + std::chrono::nanoseconds(1h).count());
    EXPECT_GT(l->token, 0u);
    coord::zookeeper::store other{url};
    auto b = other.lease_acquire("primary", "B", 1h);
    ASSERT_FALSE(b);
    EXPECT_EQ(b.error(), coord::errc::lease_held);
    EXPECT_EQ(b.error().holder, "A");
    EXPECT_EQ(b.error().token, l->token);
    ASSERT_TRUE(store.lease_release("primary", "A", l->token));
    auto c = other.lease_acquire("primary", "C", 1h);
    ASSERT_TRUE(c);
    EXPECT_GT(c->token, l->token);  // a later transaction: a larger zxid
}

// Creating the store is an explicit step: a root that was never initialized
// serves nothing that needs the store's data, and opening it creates nothing.
TEST(ZooKeeper, ARootNeverInitializedIsRefusedAndNeverCreatedUntilInitializedOnce) {
    const std::string url = zk_url() + "/" + coord::test::unique_name();
    coord::zookeeper::store store{url};
    auto f = store.fence_write("k", 5, "v");
    ASSERT_FALSE(f);
    EXPECT_EQ(f.error(), coord::errc::store_uninitialized) << f.error().code.message();
    EXPECT_NE(f.error().code.message().find("coordctl store init"), std::string::npos) << f.error().code.message();
    auto s = store.segment_allocate("ids", 10);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error(), coord::errc::store_uninitialized);
    auto l = store.lease_acquire("n", "A", 30s);
    ASSERT_FALSE(l);
    EXPECT_EQ(l.error(), coord::errc::store_uninitialized) << l.error().code.message();
    auto none = store.server_identity();
    ASSERT_TRUE(none);
    EXPECT_EQ(*none, "");  // nothing was made by opening or by the refused calls
    auto id = store.initialize({});
    ASSERT_TRUE(id) << id.error().message();
    EXPECT_EQ(id->size(), 32u);
    auto again = store.initialize({});
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error(), coord::errc::store_already_initialized);
    ASSERT_TRUE(store.fence_write("k", 5, "v"));
    auto r = store.segment_allocate("ids", 10);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->begin, 1u);
    ASSERT_TRUE(store.lease_acquire("n", "A", 30s));
}

// The store's root, or one of its records, deleted by another client
// (ZooKeeper's own zkCli, run by tests/zookeeper/zookeeper.sh): detected and
// refused, never made again; the recovery the README gives (initializing the
// store again stating floors) hands nothing out twice.
class ZooKeeperRestore : public ::testing::Test {
protected:
    const std::string url = zk_fresh_root(zk_url());
    std::string root() const { return url.substr(url.find('/', std::string("zookeeper://").size())); }
    void zkcli(const std::string& command) {
        const std::string c = std::string(COORD_ZK_SCRIPT) + " cli '" + COORD_ZK_DIR + "' " + command + " >/dev/null";
        ASSERT_EQ(std::system(c.c_str()), 0) << c;
    }
};

TEST_F(ZooKeeperRestore, ARootDeletedByAnotherClientIsRefusedNeverMadeAgainAndTheRecoveryHandsNothingOutTwice) {
    coord::zookeeper::store store{url};
    auto a = store.lease_acquire("n", "A", 1h);
    ASSERT_TRUE(a) << a.error().code.message();
    ASSERT_TRUE(store.fence_write("f", a->token, "by A"));
    auto ids = store.segment_allocate("ids", 100);
    ASSERT_TRUE(ids) << ids.error().message();
    auto c = store.ledger_claim(coord::test::old_slot_claim("job@1"));
    ASSERT_TRUE(c && c->kind == coord::claim_outcome::granted);
    ASSERT_TRUE(store.ledger_complete("job@1", c->fence, "done", 24h));

    zkcli("deleteall " + root());

    // The store object that saw the root: every call that needs the data refused.
    auto f = store.fence_write("f", a->token, "late");
    ASSERT_FALSE(f);
    EXPECT_EQ(f.error(), coord::errc::state_went_back) << f.error().code.message();
    auto s = store.segment_allocate("ids", 100);
    ASSERT_FALSE(s) << "handed out " << s->begin << " again";
    EXPECT_EQ(s.error(), coord::errc::state_went_back) << s.error().message();
    auto replay = store.ledger_claim(coord::test::old_slot_claim("job@1"));
    ASSERT_FALSE(replay) << "the done slot was answered with kind " << replay->kind;
    EXPECT_EQ(replay.error(), coord::errc::state_went_back) << replay.error().message();
    auto l = store.lease_acquire("n", "B", 1h);
    ASSERT_FALSE(l);
    EXPECT_EQ(l.error(), coord::errc::state_went_back) << l.error().code.message();

    // A process that never saw it: refused as uninitialized, and nothing made.
    coord::zookeeper::store fresh{url};
    auto g = fresh.fence_write("f", a->token, "late");
    ASSERT_FALSE(g);
    EXPECT_EQ(g.error(), coord::errc::store_uninitialized) << g.error().code.message();
    auto none = fresh.server_identity();
    ASSERT_TRUE(none);
    EXPECT_EQ(*none, "");

    // The recovery: initialized again with floors above what it handed out.
    coord::initial_floors floors;
    floors.segment = ids->end - 1;
    floors.fence_now = true;
    floors.ledger_now = true;
    ASSERT_TRUE(fresh.initialize(floors));
    auto stale = fresh.fence_write("f", a->token, "late");
    ASSERT_FALSE(stale) << "A's token " << a->token << " accepted after the recovery";
    EXPECT_EQ(stale.error(), coord::errc::stale_fence);
    coord::test::expect_ledger_fences_above_the_fence_floor(fresh, a->token);
    auto b = fresh.lease_acquire("n", "B", 1h);
    ASSERT_TRUE(b) << b.error().code.message();
    EXPECT_GT(b->token, a->token);
    ASSERT_TRUE(fresh.fence_write("f", b->token, "by B"));
    auto more = fresh.segment_allocate("ids", 100);
    ASSERT_TRUE(more) << more.error().message();
    EXPECT_GE(more->begin, ids->end);
    auto done = fresh.ledger_claim(coord::test::old_slot_claim("job@1"));
    ASSERT_TRUE(done);
    EXPECT_EQ(done->kind, coord::claim_outcome::expired);  // not run again
    // The object that saw the old root: what needs a missing record checks
    // the identity, and finds it made again.
    auto old = store.segment_allocate("a new tag", 1);
    ASSERT_FALSE(old);
    EXPECT_EQ(old.error(), coord::errc::store_identity_changed) << old.error().message();
}

TEST_F(ZooKeeperRestore, OneFenceOrSegmentNodeDeletedByAnotherClientIsDetectedEvenByAProcessThatNeverSawIt) {
    coord::zookeeper::store store{url};
    ASSERT_TRUE(store.fence_write("f", 200, "at 200"));
    ASSERT_TRUE(store.fence_write("g", 7, "at 7"));
    auto ids = store.segment_allocate("ids", 100);
    ASSERT_TRUE(ids);
    ASSERT_TRUE(store.segment_allocate("other", 10));

    zkcli("delete " + root() + "/fence/n-f");
    zkcli("delete " + root() + "/segment/n-ids");

    coord::zookeeper::store fresh{url};
    for (auto* s : {&store, &fresh}) {
        auto late = s->fence_write("f", 150, "late");
        ASSERT_FALSE(late) << "token 150 accepted after 200";
        EXPECT_EQ(late.error(), coord::errc::state_went_back) << late.error().code.message();
        auto again = s->segment_allocate("ids", 100);
        ASSERT_FALSE(again) << "handed out " << again->begin << " again";
        EXPECT_EQ(again.error(), coord::errc::state_went_back) << again.error().message();
        EXPECT_NE(again.error().message().find("missing"), std::string::npos) << again.error().message();
    }
    ASSERT_TRUE(fresh.fence_write("g", 8, "records still there are served"));
    ASSERT_TRUE(fresh.segment_allocate("other", 10));

    coord::initial_floors floors;
    floors.segment = ids->end - 1;
    floors.fence = 200;
    ASSERT_TRUE(fresh.initialize(floors, true));
    auto stale = fresh.fence_write("f", 150, "late");
    ASSERT_FALSE(stale);
    EXPECT_EQ(stale.error(), coord::errc::stale_fence);
    ASSERT_TRUE(fresh.fence_write("f", 201, "at 201"));
    auto more = fresh.segment_allocate("ids", 100);
    ASSERT_TRUE(more) << more.error().message();
    EXPECT_GE(more->begin, ids->end);
}

// The server put back on an older copy of its data directory (its
// snapshots, transaction logs and epoch files: a restored backup): the zxids
// it hands out next continue from the copy's last one, below the tokens
// granted after the copy (without the floor this test sees 28 after 31), and
// a process started after the restore cannot tell. The README's recovery (initializing the store again with
// --fence-floor now, which is the ensemble's time in nanoseconds) makes
// every later lease token, of both lease forms, larger than every earlier
// one, and refuses the old tokens at the fence.
TEST_F(ZooKeeperRestore, AServerPutBackOnAnOlderCopyGrantsTokensAboveEveryEarlierOneOnceRecovered) {
    const std::string copy = std::string(COORD_ZK_DIR) + "/backup";
    const auto script = [&](const std::string& what) {
        const std::string c = std::string(COORD_ZK_SCRIPT) + " " + what + " '" + COORD_ZK_DIR + "' '" + copy + "' >/dev/null";
        return std::system(c.c_str());
    };
    coord::fence_token highest = 0;  // the largest lease token granted before the restore
    auto note = [&](coord::fence_token t) { highest = std::max(highest, t); };
    {
        coord::zookeeper::store before{url};
        auto a = before.lease_acquire("n", "A", 1h);
        ASSERT_TRUE(a) << a.error().code.message();
        note(a->token);
        ASSERT_TRUE(before.lease_release("n", "A", a->token));
    }
    ASSERT_EQ(script("backup"), 0);  // the server stopped, copied, started again
    coord::segment_range ids{};
    coord::fence_token b_token = 0;
    {
        coord::zookeeper::store after{url};
        for (int i = 0; i < 3; ++i) {
            auto b = after.lease_acquire("n", "B", 1h);
            ASSERT_TRUE(b) << b.error().code.message();
            EXPECT_GT(b->token, highest);
            note(b_token = b->token);
            ASSERT_TRUE(after.lease_release("n", "B", b->token));
            auto s = after.session_bound().lease_acquire("m", "B", 1h);
            ASSERT_TRUE(s) << s.error().code.message();
            note(s->token);
            ASSERT_TRUE(after.session_bound().lease_release("m", "B", s->token));
        }
        ASSERT_TRUE(after.fence_write("f", b_token, "by B"));
        auto r = after.segment_allocate("ids", 100);
        ASSERT_TRUE(r) << r.error().message();
        ids = *r;
    }
    ASSERT_EQ(script("restore"), 0);

    coord::zookeeper::store later{url};
    coord::initial_floors floors;
    floors.segment = ids.end - 1;
    floors.fence_now = true;
    floors.ledger_now = true;
    ASSERT_TRUE(later.initialize(floors, /*replace=*/true));
    auto d = later.lease_acquire("n", "D", 1h);
    ASSERT_TRUE(d) << d.error().code.message();
    EXPECT_GT(d->token, highest) << "a lease token went back across the restore";
    auto e = later.session_bound().lease_acquire("m", "E", 1h);
    ASSERT_TRUE(e) << e.error().code.message();
    EXPECT_GT(e->token, highest) << "a session-bound lease token went back across the restore";
    auto stale = later.fence_write("f", b_token, "B's late write");
    ASSERT_FALSE(stale) << "token " << b_token << " accepted again after the recovery";
    EXPECT_EQ(stale.error(), coord::errc::stale_fence);
    EXPECT_TRUE(later.fence_write("f", d->token, "by D")) << "a lease granted after the recovery passes";
    auto more = later.segment_allocate("ids", 100);
    ASSERT_TRUE(more) << more.error().message();
    EXPECT_GE(more->begin, ids.end) << "a segment ID handed out again";
    ASSERT_TRUE(later.lease_release("n", "D", d->token));
    ASSERT_TRUE(later.session_bound().lease_release("m", "E", e->token));
}

// Digest credentials (options::digest): every node coord creates is
// coord's identity's to change (auth::cdrwa, world:anyone:r). Another
// client without them (ZooKeeper's zkCli) cannot delete or modify a held
// lease's record, a fence or a segment counter, nor coord's root, and coord's
// promises hold while it tries; a store object without the credentials, or
// with a wrong password, is refused with not_authorized (a configuration to
// fix), and no message carries the password.
TEST_F(ZooKeeperRestore, WithDigestCredentialsOnlyCoordsIdentityChangesItsNodes) {
    const std::string secured = zk_url() + "/" + coord::test::unique_name();
    const std::string path = secured.substr(secured.find('/', std::string("zookeeper://").size()));
    coord::zookeeper::options opts;
    opts.digest = "coord:s3cret-pw";
    coord::zookeeper::store store{secured, {}, opts};
    ASSERT_TRUE(store.initialize({}));
    auto a = store.lease_acquire("n", "A", 1h);
    ASSERT_TRUE(a) << a.error().code.message();
    ASSERT_TRUE(store.fence_write("f", a->token, "by A"));
    auto ids = store.segment_allocate("ids", 10);
    ASSERT_TRUE(ids) << ids.error().message();

    // zkCli, unauthenticated, tries to take the lease, the fence and the counter away.
    for (const std::string& c : {"deleteall " + path, "delete " + path + "/fence/n-f", "delete " + path + "/lease/n-n",
                                 "set " + path + "/lease/n-n x", "set " + path + "/segment/n-ids 1",
                                 "setAcl " + path + "/fence/n-f world:anyone:cdrwa"}) {
        const std::string run = std::string(COORD_ZK_SCRIPT) + " cli '" + COORD_ZK_DIR + "' " + c + " 2>&1";
        std::string out;
        if (std::FILE* p = ::popen(run.c_str(), "r")) {
            char buf[512];
            while (std::fgets(buf, sizeof buf, p)) out += buf;
            ::pclose(p);
        }
        if (c.rfind("deleteall", 0) != 0) {  // deleteall says nothing when it deleted nothing: checked below
            EXPECT_NE(out.find("Insufficient permission"), std::string::npos) << c << ": " << out;
        }
    }
    auto id = store.server_identity();
    ASSERT_TRUE(id) << id.error().message();
    EXPECT_NE(*id, "") << "coord's root was deleted by a client without its credentials";
    coord::zookeeper::store other{secured, {}, opts};
    auto b = other.lease_acquire("n", "B", 1h);
    ASSERT_FALSE(b) << "a second holder while A holds: the record was changed by another client";
    EXPECT_EQ(b.error(), coord::errc::lease_held);
    EXPECT_EQ(b.error().holder, "A");
    auto late = other.fence_write("f", a->token - 1, "late");
    ASSERT_FALSE(late);
    EXPECT_EQ(late.error(), coord::errc::stale_fence);
    auto more = other.segment_allocate("ids", 10);
    ASSERT_TRUE(more) << more.error().message();
    EXPECT_GE(more->begin, ids->end) << "a segment ID handed out again";

    // Without the credentials, or with a wrong password: refused, a configuration error.
    coord::zookeeper::options wrong = opts;
    wrong.digest = "coord:not-it";
    coord::zookeeper::store anonymous{secured};
    coord::zookeeper::store mistaken{secured, {}, wrong};
    for (auto* s : {&anonymous, &mistaken}) {
        auto w = s->fence_write("f", a->token + 1, "v");
        ASSERT_FALSE(w);
        EXPECT_EQ(w.error(), coord::condition::not_authorized) << w.error().code.message();
        EXPECT_EQ(w.error().code.message().find("s3cret"), std::string::npos);
        EXPECT_EQ(w.error().code.message().find("not-it"), std::string::npos);
        auto l = s->lease_acquire("other", "C", 1h);
        ASSERT_FALSE(l);
        EXPECT_EQ(l.error(), coord::condition::not_authorized) << l.error().code.message();
        auto r = s->segment_allocate("ids", 10);
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error(), coord::condition::not_authorized) << r.error().message();
    }
    EXPECT_TRUE(other.fence_write("f", a->token + 1, "by the credentials")) << "the store still serves its identity";
    ASSERT_TRUE(store.lease_release("n", "A", a->token));
    coord::zookeeper::options malformed;
    malformed.digest = "no colon";
    EXPECT_THROW((coord::zookeeper::store{secured, {}, malformed}), std::invalid_argument);
}

// lease_watch_store: a watch on the lease's node wakes the watcher at a
// grant and a release by another client, and observe() with it.
TEST(ZooKeeper, ALeaseWatchWakesAtAGrantAndARelease) {
    const std::string url = zk_fresh_root(zk_url());
    coord::zookeeper::store store{url};
    coord::zookeeper::store other{url};
    coord::test::expect_lease_watch_wakes(store, other, /*rearms=*/true);
}

TEST(ZooKeeper, ARenewThatLandsAfterTheTermIsRefusedAndUndone) {
    const std::string url = zk_fresh_root(zk_url());
    coord::zookeeper::store store{url};
    auto l = store.lease_acquire("n", "A", 300ms);
    ASSERT_TRUE(l);
    wait_for_server_time(store, l->expires_at.count());
    auto r = store.lease_renew("n", "A", l->token, 300ms);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), coord::errc::lease_expired);
    auto now = store.lease_read("n");
    ASSERT_TRUE(now);
    EXPECT_FALSE(now->has_value());
    coord::zookeeper::store other{url};
    auto b = other.lease_acquire("n", "B", 1h);
    ASSERT_TRUE(b) << b.error().code.message();
    EXPECT_GT(b->token, l->token);
}

TEST(ZooKeeper, FencesStayExactAt2To62And2To63Minus1And2To64Minus1) {
    coord::zookeeper::store store{zk_fresh_root(zk_url())};
    constexpr std::uint64_t p62 = std::uint64_t{1} << 62;
    constexpr std::uint64_t max63 = (std::uint64_t{1} << 63) - 1;
    constexpr std::uint64_t max64 = std::numeric_limits<std::uint64_t>::max();
    ASSERT_TRUE(store.fence_write("k", p62 + 1, "a"));
    EXPECT_EQ(store.fence_write("k", p62, "b").error().highest, p62 + 1);
    ASSERT_TRUE(store.fence_write("k", max63, 5, "c"));
    EXPECT_EQ(store.fence_write("k", max63, 5, "d").error(), coord::errc::stale_sequence);
    ASSERT_TRUE(store.fence_write("k", max64, "e"));
    coord::zookeeper::store other{store.url()};
    auto v = other.fence_read("k");
    ASSERT_TRUE(v);
    EXPECT_EQ(v->fence, max64);
    EXPECT_EQ(v->value, "e");
    auto seg = store.segment_allocate("ids", max63 - 1);
    ASSERT_TRUE(seg);
    EXPECT_EQ(seg->end, max63);
    EXPECT_TRUE(store.segment_allocate("ids", 1));
    EXPECT_EQ(store.segment_allocate("ids", 1).error(), coord::errc::range_exhausted);
}

TEST(ZooKeeper, SessionBoundLeasesLastAsLongAsTheirSession) {
    const std::string url = zk_fresh_root(zk_url());
    auto holder = std::make_unique<coord::zookeeper::store>(url);
    auto& leases = holder->session_bound();
    auto l = leases.lease_acquire("leader", "A", 1h);  // not ZooKeeper's to give: the session's term
    ASSERT_TRUE(l) << l.error().code.message();
    EXPECT_EQ(l->ttl, std::chrono::nanoseconds(holder->session_timeout()));
    EXPECT_NE(l->ttl, std::chrono::nanoseconds(1h));
    // The same session asking again (as after a lost answer): the same grant, no second node.
    auto again = leases.lease_acquire("leader", "A", 1h);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->token, l->token);
    coord::zookeeper::store other{url};
    auto b = other.session_bound().lease_acquire("leader", "B", 1h);
    ASSERT_FALSE(b);
    EXPECT_EQ(b.error(), coord::errc::lease_held);
    EXPECT_EQ(b.error().holder, "A");
    EXPECT_EQ(b.error().token, l->token);
    EXPECT_EQ(other.session_bound().lease_renew("leader", "B", 0, 0ns).error(), coord::errc::not_lease_holder);
    EXPECT_TRUE(leases.lease_renew("leader", "A", l->token, 0ns));
    // The holder's process ends its session: the ensemble deletes the node.
    holder.reset();
    auto c = other.session_bound().lease_acquire("leader", "B", 1h);
    ASSERT_TRUE(c) << c.error().code.message();
    EXPECT_GT(c->token, l->token);
    ASSERT_TRUE(other.session_bound().lease_release("leader", "B", c->token));
    auto read = other.session_bound().lease_read("leader");
    ASSERT_TRUE(read);
    EXPECT_FALSE(read->has_value());
}

TEST(ZooKeeper, BadUrlsAreRefusedAndNoServerIsAClearError) {
    for (const char* bad : {"zk://h:1", "zookeeper://", "zookeeper://h", "zookeeper://h:0", "zookeeper://h:1,",
                            "zookeeper://h:1/", "zookeeper://h:1//x"})
        EXPECT_THROW(coord::zookeeper::store{bad}, std::invalid_argument) << bad;
    coord::zookeeper::options o;
    o.connect_timeout = 500ms;
    const auto start = std::chrono::steady_clock::now();
    try {
        coord::zookeeper::store store{"zookeeper://127.0.0.1:1", {}, o};
        ADD_FAILURE() << "connected to a closed port";
    } catch (const coord::store_error& e) {
        EXPECT_EQ(e.code(), coord::zookeeper::errc::connection_failed) << e.what();
        EXPECT_EQ(e.code(), coord::condition::unavailable);
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms + 3s);  // a hang guard, not a speed claim
}

// A value above the ensemble's packet limit is bad input, refused before it
// is sent (the ensemble would close the connection: never "unavailable" or
// "outcome unknown"); the fence is unchanged and the session serves on.
TEST(ZooKeeper, AValueAboveTheRequestLimitIsRefusedUpFrontAsTooLarge) {
    coord::zookeeper::store store{zk_fresh_root(zk_url())};
    ASSERT_TRUE(store.fence_write("big", 1, "small"));
    auto r = store.fence_write("big", 2, std::string(2u * 1024 * 1024, 'v'));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), coord::errc::value_too_large) << r.error().code.message();
    EXPECT_EQ(r.error(), coord::condition::bad_input);
    EXPECT_NE(r.error().code.detail().find("jute.maxbuffer"), std::string::npos) << r.error().code.detail();
    auto v = store.fence_read("big");
    ASSERT_TRUE(v);
    EXPECT_EQ(v->fence, 1u);
    EXPECT_EQ(v->value, "small");
    EXPECT_TRUE(store.fence_write("big", 2, std::string(1000 * 1000, 'v'))) << "a 1 MB value fits";
}

// A node of coord's holding what coord did not write (another program
// wrote it) is corrupt state, not "outcome unknown"; nothing is written.
TEST(ZooKeeper, ANodeHoldingWhatCoordDidNotWriteIsCorruptState) {
    const std::string url = zk_fresh_root(zk_url());
    coord::zookeeper::store store{url};
    ASSERT_TRUE(store.fence_write("k", 5, "mine"));
    const auto address = coord::zookeeper::parse_url(url);
    ASSERT_TRUE(address);
    // Another program, with the ZooKeeper C client.
    zhandle_t* zh = zookeeper_init(address->hosts.c_str(), nullptr, 10000, nullptr, nullptr, 0);
    ASSERT_NE(zh, nullptr);
    const std::string node = address->root + "/fence/n-k";
    const std::string foreign = "not a coord record";
    int rc = ZCONNECTIONLOSS;
    for (int i = 0; i < 100 && rc == ZCONNECTIONLOSS; ++i) {
        std::promise<int> done;
        auto answer = done.get_future();
        const int sent = zoo_aset(
            zh, node.c_str(), foreign.data(), static_cast<int>(foreign.size()), -1,
            [](int r, const Stat*, const void* d) { static_cast<std::promise<int>*>(const_cast<void*>(d))->set_value(r); },
            &done);
        rc = sent == ZOK ? answer.get() : sent;
        if (rc == ZCONNECTIONLOSS) std::this_thread::sleep_for(50ms);
    }
    zookeeper_close(zh);
    ASSERT_EQ(rc, ZOK);
    coord::zookeeper::store other{url};
    auto read = other.fence_read("k");
    ASSERT_FALSE(read);
    EXPECT_EQ(read.error(), coord::errc::state_corrupt) << read.error().detail();
    EXPECT_EQ(read.error(), coord::condition::corrupt_state);
    auto write = other.fence_write("k", 9, "over it");
    ASSERT_FALSE(write);
    EXPECT_EQ(write.error(), coord::condition::corrupt_state) << write.error().code.detail();
}

}  // namespace
