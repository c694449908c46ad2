// SPDX-License-Identifier: Apache-2.0
// etcd-only behaviour on one member: terms in etcd's whole seconds (rounded
// up from the TTL and a quarter second, the minimum), tokens that are
// revisions and keep growing across compaction, exact 64-bit fences, a new TTL swapped in on renew, released
// grants' leases reused with a whole term, revocations, endpoints that
// cannot be reached skipped for the next, and clear errors.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>

#include "coord/fence.hpp"
#include "coord/lease.hpp"
#include "etcd/etcd_support.hpp"
#include "support/lease_watch_check.hpp"

namespace {

using namespace std::chrono_literals;
using coord::test::etcd_fresh_prefix;
using coord::test::etcd_options;
using coord::test::etcd_url;

std::unique_ptr<coord::etcd::store> fresh_store() {
    auto s = std::make_unique<coord::etcd::store>(etcd_url(), coord::etcd::server_clock{}, etcd_options(etcd_fresh_prefix()));
    coord::test::etcd_init(*s);
    return s;
}

// A port on loopback that nobody listens on.
std::string closed_endpoint() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (void)::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    (void)::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    ::close(fd);
    return "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

// The everyday names on this engine (coord/detail/store_aliases.hpp).
static_assert(std::is_same_v<coord::etcd::lease_manager, coord::basic_lease_manager<coord::etcd::store>>);
static_assert(std::is_same_v<coord::etcd::fenced_resource, coord::basic_fenced_resource<coord::etcd::store>>);
static_assert(std::is_same_v<coord::etcd::snowflake,
                             coord::basic_snowflake<coord::default_layout, coord::system_clock, coord::etcd::store>>);
static_assert(std::is_same_v<coord::etcd::segment_generator, coord::basic_segment_generator<coord::etcd::store>>);

// lease_watch_store: an etcd watch on the holder key wakes the watcher at a
// grant and a release by another client, and observe() with it.
TEST(Etcd, ALeaseWatchWakesAtAGrantAndARelease) {
    const auto opts = etcd_options(etcd_fresh_prefix());
    coord::etcd::store store{etcd_url(), coord::etcd::server_clock{}, opts};
    coord::etcd::store other{etcd_url(), coord::etcd::server_clock{}, opts};
    coord::test::etcd_init(store);
    coord::test::expect_lease_watch_wakes(store, other, /*rearms=*/true);
}

// etcdctl snapshot save, more grants, writes and ranges, then etcdctl
// snapshot restore onto the same endpoint: the store object that saw the
// later revisions refuses every call (state_went_back), rather than hand out
// a lease token, accept a fence write or allocate a range again.
TEST(EtcdRestore, ASnapshotRestoredUnderAStoreObjectIsRefusedNeverServed) {
    const auto opts = etcd_options(etcd_fresh_prefix());
    coord::etcd::store store{etcd_url(), coord::etcd::server_clock{}, opts};
    coord::test::etcd_init(store);
    const std::string snapshot = std::string(COORD_ETCD_DIR) + "/snapshot.db";
    const auto script = [&](const std::string& what) {
        const std::string c = std::string(COORD_ETCD_SCRIPT) + " " + what + " '" + COORD_ETCD_DIR + "' '" + snapshot + "'";
        return std::system(c.c_str());
    };
    auto a = store.lease_acquire("n", "A", 30s);
    ASSERT_TRUE(a) << a.error().code.message();
    ASSERT_TRUE(store.lease_release("n", "A", a->token));
    ASSERT_TRUE(store.fence_write("f", 100, "at 100"));
    ASSERT_EQ(script("snapshot"), 0);
    auto b = store.lease_acquire("n", "B", 30s);
    ASSERT_TRUE(b) << b.error().code.message();
    ASSERT_TRUE(store.lease_release("n", "B", b->token));
    ASSERT_TRUE(store.fence_write("f", 200, "at 200"));
    auto range = store.segment_allocate("s", 10);
    ASSERT_TRUE(range) << range.error().message();
    ASSERT_EQ(script("restore"), 0);

    auto again = store.lease_acquire("n", "C", 30s);
    ASSERT_FALSE(again) << "granted token " << again->token << " after a restore (B had " << b->token << ")";
    EXPECT_EQ(again.error(), coord::errc::state_went_back) << again.error().code.message();
    auto late = store.fence_write("f", 150, "late");
    ASSERT_FALSE(late);
    EXPECT_EQ(late.error(), coord::errc::state_went_back) << late.error().code.message();
    auto next = store.segment_allocate("s", 10);
    ASSERT_FALSE(next);
    EXPECT_EQ(next.error(), coord::errc::state_went_back) << next.error().message();
    EXPECT_NE(next.error().message().find("went back"), std::string::npos) << next.error().message();

    // A process started after the restore cannot tell (it never saw the
    // later revisions). The README's recovery: initialize the store again
    // with floors above what was handed out (--fence-floor now: this
    // machine's microseconds), after which nothing is handed out twice.
    coord::etcd::store later{etcd_url(), coord::etcd::server_clock{}, opts};
    coord::etcd::initial_floors floors;
    floors.segment = range->end - 1;
    floors.fence_now = true;
    floors.reservation_now = true;
    ASSERT_EQ(later.initialize(floors).error(), coord::errc::store_already_initialized);
    auto untouched = later.fence_read("f");
    ASSERT_TRUE(untouched) << untouched.error().message();
    EXPECT_LE(untouched->fence, 150u) << "a refused initialization raised a record";  // 150: the late write above landed
    ASSERT_TRUE(later.initialize(floors, /*replace=*/true));
    auto d = later.lease_acquire("n", "D", 30s);
    ASSERT_TRUE(d) << d.error().code.message();
    EXPECT_GT(d->token, b->token) << "a lease token went back across the restore";
    EXPECT_GT(d->token, 200u);
    auto stale = later.fence_write("f", 200, "B's late write");
    ASSERT_FALSE(stale) << "token 200 accepted again after the recovery";
    EXPECT_EQ(stale.error(), coord::errc::stale_fence);
    EXPECT_GT(stale.error().highest, 200u);
    auto fresh_key = later.fence_write("a key the snapshot never had", b->token, "late");
    ASSERT_FALSE(fresh_key);
    EXPECT_EQ(fresh_key.error(), coord::errc::stale_fence);
    EXPECT_TRUE(later.fence_write("f", d->token, "by D")) << "a lease granted after the recovery passes";
    auto ids = later.segment_allocate("s", 10);
    ASSERT_TRUE(ids) << ids.error().message();
    EXPECT_GE(ids->begin, range->end) << "a segment ID handed out again";
    auto other_tag = later.segment_allocate("t", 10);
    ASSERT_TRUE(other_tag);
    EXPECT_GE(other_tag->begin, range->end) << "a missing counter continues above the floor";
    EXPECT_EQ(store.segment_allocate("s", 10).error(), coord::errc::store_identity_changed)
        << "a store object opened before the recovery keeps working";
    ASSERT_TRUE(later.lease_release("n", "D", d->token));
}

// The store's keys deleted by another client (Debian's etcdctl, `del
// --prefix`): nothing is made again over them. A store object that saw the
// store refuses with state_went_back, one that did not with
// store_uninitialized (creating a store is `store init`); leases too, since
// their tokens rest on the store's floor.
TEST(Etcd, KeysDeletedByEtcdctlAreNeverMadeAgain) {
    const auto opts = etcd_options(etcd_fresh_prefix());
    coord::etcd::store store{etcd_url(), coord::etcd::server_clock{}, opts};
    coord::test::etcd_init(store);
    ASSERT_TRUE(store.fence_write("f", 200, "at 200"));
    auto range = store.segment_allocate("s", 10);
    ASSERT_TRUE(range);
    ASSERT_TRUE(store.revoke_token("stolen", 4000000000));
    const std::string endpoint = "http://" + etcd_url().substr(std::string("etcd://").size());
    const std::string del = "ETCDCTL_API=3 etcdctl --endpoints " + endpoint + " del --prefix '" + store.key_prefix() + "' >/dev/null";
    ASSERT_EQ(std::system(del.c_str()), 0) << del;

    auto late = store.fence_write("f", 150, "late");
    ASSERT_FALSE(late) << "token 150 accepted after 200";
    EXPECT_EQ(late.error(), coord::errc::state_went_back) << late.error().code.message();
    EXPECT_NE(late.error().code.message().find("store init"), std::string::npos) << late.error().code.message();
    auto again = store.segment_allocate("s", 10);
    ASSERT_FALSE(again) << "handed out " << again->begin << " again";
    EXPECT_EQ(again.error(), coord::errc::state_went_back);
    EXPECT_EQ(store.token_revoked("stolen", "", std::nullopt, 1).error(), coord::errc::state_went_back);
    EXPECT_EQ(store.fence_read("f").error(), coord::errc::state_went_back);
    EXPECT_EQ(store.lease_acquire("n", "A", 30s).error(), coord::errc::state_went_back);
    coord::etcd::store opened_after{etcd_url(), coord::etcd::server_clock{}, opts};
    EXPECT_EQ(opened_after.segment_allocate("s", 10).error(), coord::errc::store_uninitialized);
    EXPECT_EQ(opened_after.fence_write("f", 150, "late").error(), coord::errc::store_uninitialized);
    EXPECT_EQ(opened_after.lease_acquire("n", "A", 30s).error(), coord::errc::store_uninitialized);
    const std::string count = "test -z \"$(ETCDCTL_API=3 etcdctl --endpoints " + endpoint + " get --prefix --keys-only '" +
                              store.key_prefix() + "')\"";
    EXPECT_EQ(std::system(count.c_str()), 0) << "a refused call made a key";
}

TEST(Etcd, TermsAreEtcdsWholeSecondsRoundedUpAndReportedAsGranted) {
    auto store = fresh_store();
    const auto before = std::chrono::system_clock::now();
    auto l = store->lease_acquire("a", "A", 1500ms);
    ASSERT_TRUE(l) << l.error().code.message();
    EXPECT_EQ(l->ttl, 2s);  // 1.5 s (+ the quarter second of reuse margin) is not whole seconds: rounded up
    EXPECT_GE(l->expires_at, std::chrono::duration_cast<std::chrono::nanoseconds>((before + 2s).time_since_epoch()));
    auto tiny = store->lease_acquire("b", "B", 100ms);
    ASSERT_TRUE(tiny);
    EXPECT_GE(tiny->ttl, 2s);  // below etcd's minimum: raised to it, and said so
    auto r = store->lease_read("a");
    ASSERT_TRUE(r && *r);
    EXPECT_EQ((*r)->token, l->token);
    EXPECT_LE((*r)->expires_at, l->expires_at + 1s);  // what etcd says is left
    // Renew with a longer TTL: a new lease swapped in, the same token.
    auto longer = store->lease_renew("a", "A", l->token, 30s);
    ASSERT_TRUE(longer) << longer.error().code.message();
    EXPECT_EQ(longer->token, l->token);
    EXPECT_EQ(longer->ttl, 31s);  // 30 s and the margin, rounded up
    auto again = store->lease_read("a");
    ASSERT_TRUE(again && *again);
    EXPECT_GT((*again)->expires_at, l->expires_at + 20s);
    auto same = store->lease_renew("a", "A", 0, 0ns);  // keepalive: the granted term again
    ASSERT_TRUE(same);
    EXPECT_EQ(same->ttl, 31s);
}

// A store object keeps the leases of the grants it released as spares and
// renews one for a new grant asking the same whole seconds: the new grant
// gets the full term it asked for, another TTL gets a lease of its own, and
// nothing done with the old grant's token reaches the new holder.
TEST(Etcd, AReleasedGrantsLeaseServesANewGrantOfTheSameTTLWithItsFullTerm) {
    auto store = fresh_store();
    auto a = store->lease_acquire("a", "A", 5s);
    ASSERT_TRUE(a) << a.error().code.message();
    ASSERT_TRUE(store->lease_release("a", "A", a->token));
    auto b = store->lease_acquire("b", "B", 30s);  // another TTL: not a's lease
    ASSERT_TRUE(b);
    EXPECT_EQ(b->ttl, 31s);
    auto rb = store->lease_read("b");
    ASSERT_TRUE(rb && *rb);
    EXPECT_EQ((*rb)->ttl, 31s);  // etcd's granted TTL
    auto c = store->lease_acquire("c", "C", 5s);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->ttl, 6s);
    EXPECT_GT(c->token, a->token);
    auto rc = store->lease_read("c");
    ASSERT_TRUE(rc && *rc);
    EXPECT_EQ((*rc)->ttl, 6s);
    EXPECT_EQ((*rc)->owner, "C");
    // The old grant's token reaches nothing: not the name, not the lease.
    auto stale = store->lease_renew("a", "A", a->token, 0ns);
    ASSERT_FALSE(stale);
    EXPECT_EQ(stale.error(), coord::errc::not_lease_holder);  // released: as the memory store says
    EXPECT_EQ(store->lease_release("a", "A", a->token).error(), coord::errc::not_lease_holder);
    auto still = store->lease_read("c");
    ASSERT_TRUE(still && *still);
    EXPECT_EQ((*still)->token, c->token);
    // Releasing c leaves b alone.
    ASSERT_TRUE(store->lease_release("c", "C", c->token));
    auto b_after = store->lease_read("b");
    ASSERT_TRUE(b_after && *b_after);
    EXPECT_EQ((*b_after)->owner, "B");
    EXPECT_FALSE(*store->lease_read("c"));
}

// A spare whose term began less than the margin ago serves the next acquire
// without a renewal, and the grant reports the term etcd will keep (no later
// than from when the spare was asked for); a spare that etcd no longer has
// (revoked by someone else, or this process paused past its term) makes
// the put fail, and the acquire goes on with a lease of its own.
TEST(Etcd, ASpareIsReusedWithoutARenewalWhileTheAskedTTLIsLeftAndAGoneSpareIsReplaced) {
    auto store = fresh_store();
    auto a = store->lease_acquire("a", "A", 30s);
    ASSERT_TRUE(a) << a.error().code.message();
    EXPECT_EQ(a->ttl, 31s);
    ASSERT_TRUE(store->lease_release("a", "A", a->token));
    const auto asked = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch());
    auto b = store->lease_acquire("b", "B", 30s);
    ASSERT_TRUE(b) << b.error().code.message();
    EXPECT_GT(b->token, a->token);
    EXPECT_GE(b->expires_at, asked + 30s) << "the asked TTL is left";
    EXPECT_LE(b->expires_at, a->expires_at) << "a reused spare reports no more than etcd will keep";
    auto rb = store->lease_read("b");
    ASSERT_TRUE(rb && *rb);
    EXPECT_EQ((*rb)->owner, "B");
    EXPECT_GE((*rb)->expires_at + 1s, b->expires_at);  // etcd's own count agrees (to its whole seconds)
    ASSERT_TRUE(store->lease_release("b", "B", b->token));

    // Every lease of etcd revoked by another client: the store object's spare is gone.
    coord::etcd::pool other{etcd_url(), etcd_options(etcd_fresh_prefix())};
    auto leases = other.request("/v3/lease/leases", "{}", false);
    ASSERT_TRUE(leases) << leases.error().message();
    int revoked = 0;
    for (auto l : coord::etcd::detail::array_member(*leases, "leases")) {
        auto id = coord::etcd::detail::int_member(l, "ID");
        ASSERT_TRUE(id);
        if (other.request("/v3/lease/revoke", R"({"ID":")" + std::to_string(*id) + "\"}", true)) ++revoked;
    }
    EXPECT_GE(revoked, 1);
    auto c = store->lease_acquire("c", "C", 30s);
    ASSERT_TRUE(c) << c.error().code.message();
    auto rc = store->lease_read("c");
    ASSERT_TRUE(rc && *rc) << "the grant must live on a lease etcd has";
    EXPECT_EQ((*rc)->owner, "C");
    EXPECT_EQ((*rc)->token, c->token);
}

// The same on a test clock, where terms end when the test says: a spare
// renewed for a new grant gives it a whole term from the grant (not what was
// left of the spare's), and a spare whose term ended unused is not reused.
TEST(Etcd, ASpareLeaseGivesAWholeTermAndOneThatEndedUnusedIsNotReused) {
    coord::manual_clock clock{coord::test::test_epoch()};
    coord::etcd::basic_store<coord::manual_clock> store{etcd_url(), clock, etcd_options(etcd_fresh_prefix())};
    coord::test::etcd_init(store);
    const auto now = [&] { return std::chrono::duration_cast<std::chrono::nanoseconds>(clock.now().time_since_epoch()); };
    auto a = store.lease_acquire("a", "A", 10s);
    ASSERT_TRUE(a) << a.error().code.message();
    ASSERT_TRUE(store.lease_release("a", "A", a->token));
    clock.advance(6s);  // 4 s left of the released grant's lease
    auto b = store.lease_acquire("b", "B", 10s);
    ASSERT_TRUE(b) << b.error().code.message();
    EXPECT_EQ(b->expires_at, now() + 10s);
    clock.advance(5s);  // past where the spare's own term would have ended
    auto held = store.lease_read("b");
    ASSERT_TRUE(held) << held.error().message();
    ASSERT_TRUE(*held) << "the new grant ended with the spare's old term";
    EXPECT_EQ((*held)->owner, "B");
    clock.advance(6s);  // b's own term ends
    EXPECT_FALSE(*store.lease_read("b"));
    EXPECT_EQ(store.lease_renew("b", "B", b->token, 0ns).error(), coord::errc::lease_expired);
    // A spare whose term ended unused: the next grant has a lease of its own.
    auto c = store.lease_acquire("c", "C", 10s);
    ASSERT_TRUE(c);
    ASSERT_TRUE(store.lease_release("c", "C", c->token));
    clock.advance(20s);
    auto d = store.lease_acquire("d", "D", 10s);
    ASSERT_TRUE(d) << d.error().code.message();
    EXPECT_EQ(d->expires_at, now() + 10s);
    clock.advance(9s);
    auto rd = store.lease_read("d");
    ASSERT_TRUE(rd && *rd);
    EXPECT_EQ((*rd)->owner, "D");
    EXPECT_GT(d->token, c->token);
}

// When a term ends etcd deletes the holder key and keeps nothing else: the
// store object that made the grant tells a late renew it expired; another
// store object (another process) cannot tell an ended term from a release
// and says not_lease_holder. Neither renews it.
TEST(Etcd, ALateRenewIsToldExpiredByTheGrantsStoreObjectAndNotHolderByAnother) {
    coord::manual_clock clock{coord::test::test_epoch()};
    const std::string prefix = etcd_fresh_prefix();
    coord::etcd::basic_store<coord::manual_clock> mine{etcd_url(), clock, etcd_options(prefix)};
    coord::etcd::basic_store<coord::manual_clock> other{etcd_url(), clock, etcd_options(prefix)};
    coord::test::etcd_init(mine);
    auto a = mine.lease_acquire("a", "A", 5s);
    ASSERT_TRUE(a) << a.error().code.message();
    auto seen = other.lease_read("a");
    ASSERT_TRUE(seen && *seen);
    EXPECT_EQ((*seen)->token, a->token);
    clock.advance(7s);  // past etcd's 6 s
    EXPECT_EQ(other.lease_renew("a", "A", a->token, 5s).error(), coord::errc::not_lease_holder);
    EXPECT_EQ(mine.lease_renew("a", "A", a->token, 5s).error(), coord::errc::lease_expired);
    EXPECT_EQ(mine.lease_renew("a", "A", a->token, 0ns).error(), coord::errc::lease_expired);
    EXPECT_FALSE(*other.lease_read("a"));
    // The name is free: the next grant has a larger token.
    auto b = other.lease_acquire("a", "B", 5s);
    ASSERT_TRUE(b) << b.error().code.message();
    EXPECT_GT(b->token, a->token);
    EXPECT_EQ(mine.lease_renew("a", "A", a->token, 5s).error(), coord::errc::not_lease_holder);
}

TEST(Etcd, TokensAreRevisionsThatKeepGrowingAcrossCompaction) {
    auto store = fresh_store();
    auto a = store->lease_acquire("n", "A", 10s);
    ASSERT_TRUE(a);
    auto rev = store->revision();
    ASSERT_TRUE(rev);
    EXPECT_LE(static_cast<std::int64_t>(a->token), *rev);
    ASSERT_TRUE(store->lease_release("n", "A", a->token));
    // Compact everything up to now: old revisions are gone from the history,
    // the counter is not.
    auto compacted = coord::etcd::pool(etcd_url(), {}).request("/v3/kv/compaction",
                                                              "{\"revision\":\"" + std::to_string(*rev) + "\"}", true);
    ASSERT_TRUE(compacted) << compacted.error().message();
    auto b = store->lease_acquire("n", "B", 10s);
    ASSERT_TRUE(b);
    EXPECT_GT(b->token, a->token);
    coord::basic_keyed_fenced_resource res{*store};
    ASSERT_TRUE(res.write("k", b->token, "B"));
    EXPECT_EQ(res.write("k", a->token, "A").error(), coord::errc::stale_fence);
}

TEST(Etcd, FencesStayExactAt2To62And2To63Minus1And2To64Minus1) {
    auto store = fresh_store();
    constexpr std::uint64_t p62 = std::uint64_t{1} << 62;
    constexpr std::uint64_t max63 = (std::uint64_t{1} << 63) - 1;
    constexpr std::uint64_t max64 = std::numeric_limits<std::uint64_t>::max();
    ASSERT_TRUE(store->fence_write("k", p62 + 1, "a"));
    EXPECT_EQ(store->fence_write("k", p62, "b").error().highest, p62 + 1);
    ASSERT_TRUE(store->fence_write("k", max63, 5, "c"));
    EXPECT_EQ(store->fence_write("k", max63, 5, "d").error(), coord::errc::stale_sequence);
    ASSERT_TRUE(store->fence_write("k", max63, 6, "e"));
    ASSERT_TRUE(store->fence_write("k", max63, "f"));  // the same token without a sequence keeps it
    EXPECT_EQ(store->fence_write("k", max63, 6, "g").error(), coord::errc::stale_sequence);
    ASSERT_TRUE(store->fence_write("k", max64, "h"));
    auto v = store->fence_read("k");
    ASSERT_TRUE(v);
    EXPECT_EQ(v->fence, max64);
    EXPECT_EQ(v->value, "h");
    auto seg = store->segment_allocate("ids", max63 - 1);
    ASSERT_TRUE(seg);
    EXPECT_EQ(seg->end, max63);
    auto last = store->segment_allocate("ids", 1);
    ASSERT_TRUE(last);
    EXPECT_EQ(last->end, coord::segment_id_limit);
    EXPECT_EQ(store->segment_allocate("ids", 1).error(), coord::errc::range_exhausted);
}

TEST(Etcd, RevocationsKeepTheLaterTimeAndNeverMoveBack) {
    auto store = fresh_store();
    auto& st = *store;
    EXPECT_EQ(st.token_revoked("t1", "alice", 100, 150), false);
    ASSERT_TRUE(st.revoke_token("t1", 200));
    ASSERT_TRUE(st.revoke_token("t1", 180));  // never moves back
    EXPECT_EQ(st.token_revoked("t1", "alice", 100, 150), true);
    EXPECT_EQ(st.token_revoked("t1", "alice", 100, 201), false);  // past the token's exp
    ASSERT_TRUE(st.revoke_subject("alice", 120));
    EXPECT_EQ(st.token_revoked("t2", "alice", 100, 150), true);
    EXPECT_EQ(st.token_revoked("t2", "alice", 130, 150), false);
    EXPECT_EQ(st.token_revoked("t2", "alice", std::nullopt, 150), true);
    ASSERT_TRUE(st.revoke_subject("alice", 5));
    EXPECT_EQ(st.token_revoked("t2", "alice", 100, 150), true);
    EXPECT_EQ(st.token_revoked("", "", std::nullopt, 150), false);
}

TEST(Etcd, AnEndpointThatCannotBeReachedIsSkippedForTheNext) {
    const std::string live = etcd_url().substr(7);
    const std::string url = "etcd://" + closed_endpoint() + "," + live;
    coord::etcd::store store{url, {}, etcd_options(etcd_fresh_prefix())};
    coord::test::etcd_init(store);
    auto l = store.lease_acquire("n", "A", 5s);
    ASSERT_TRUE(l) << l.error().code.message();
    EXPECT_TRUE(store.fence_write("k", l->token, "v"));
    EXPECT_EQ(store.endpoints().size(), 2u);
}

TEST(Etcd, NoEndpointReachableIsAClearErrorAndBadUrlsAreRefused) {
    try {
        coord::etcd::store store{"etcd://" + closed_endpoint()};
        ADD_FAILURE() << "connected to a closed port";
    } catch (const coord::store_error& e) {
        EXPECT_EQ(e.code(), coord::etcd::errc::connection_failed) << e.what();
        EXPECT_EQ(e.code(), coord::condition::unavailable);
    }
    for (const char* bad : {"http://h:1", "etcd://", "etcd://h", "etcd://h:0", "etcd://h:1,", "etcd://h:1,x:99999"})
        EXPECT_THROW(coord::etcd::store{bad}, std::invalid_argument) << bad;
    coord::etcd::options o;
    o.pool_size = 0;
    EXPECT_THROW((coord::etcd::store{etcd_url(), {}, o}), std::invalid_argument);
}

TEST(Etcd, APortThatNeverAnswersTimesOut) {
    const coord::test::silent_port silent;
    coord::etcd::options o;
    o.operation_timeout = 300ms;
    const auto start = std::chrono::steady_clock::now();
    try {
        coord::etcd::store store{"etcd://" + silent.address(), {}, o};
        ADD_FAILURE() << "a port that never answers answered";
    } catch (const coord::store_error& e) {
        EXPECT_EQ(e.code(), coord::etcd::errc::deadline_passed) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 300ms + 2s);  // a hang guard, not a speed claim
}

// A value above etcd's request limit is bad input, refused before it is
// sent (never "unavailable" or "outcome unknown"); the fence is unchanged.
TEST(Etcd, AValueAboveTheRequestLimitIsRefusedUpFrontAsTooLarge) {
    auto store = fresh_store();
    ASSERT_TRUE(store->fence_write("big", 1, "small"));
    auto r = store->fence_write("big", 2, std::string(2u * 1024 * 1024, 'v'));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), coord::errc::value_too_large) << r.error().code.message();
    EXPECT_EQ(r.error(), coord::condition::bad_input);
    EXPECT_NE(r.error().code.detail().find("max_request_bytes"), std::string::npos) << r.error().code.detail();
    auto v = store->fence_read("big");
    ASSERT_TRUE(v);
    EXPECT_EQ(v->fence, 1u);
    EXPECT_EQ(v->value, "small");
    EXPECT_TRUE(store->fence_write("big", 2, std::string(1024 * 1024, 'v'))) << "a 1 MiB value fits";
}

}  // namespace
