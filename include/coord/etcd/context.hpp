// SPDX-License-Identifier: Apache-2.0
// coord/etcd/context.hpp: what every adapter of the etcd engine shares: key
// names, the transaction requests (compares and operations in etcd's JSON),
// the answers, and the clock driver: with server_clock etcd's lease timers
// judge every term; with a test clock the store revokes the leases whose
// term ended on that clock before each call (a revoke deletes a lease's keys
// as etcd's own expiry does).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "coord/clock.hpp"
#include "coord/detail/backoff.hpp"
#include "coord/etcd/connection.hpp"
#include "coord/initial_floors.hpp"

namespace coord::etcd::detail {

/// A compare of a transaction.
inline std::string create_is(const std::string& key, std::int64_t rev) {
    return R"({"target":"CREATE","key":")" + b64(key) + R"(","result":"EQUAL","create_revision":)" + number(rev) + "}";
}
inline std::string mod_is(const std::string& key, std::int64_t rev) {
    return R"({"target":"MOD","key":")" + b64(key) + R"(","result":"EQUAL","mod_revision":)" + number(rev) + "}";
}
inline std::string value_is(const std::string& key, std::string_view v, const char* result = "EQUAL") {
    return R"({"target":"VALUE","key":")" + b64(key) + R"(","result":")" + result + R"(","value":")" + b64(v) + "\"}";
}
inline std::string lease_is(const std::string& key, std::int64_t id) {
    return R"({"target":"LEASE","key":")" + b64(key) + R"(","result":"EQUAL","lease":)" + number(id) + "}";
}
/// An operation of a transaction.
inline std::string put(const std::string& key, std::string_view v, std::int64_t lease = 0) {
    std::string s = R"({"request_put":{"key":")" + b64(key) + R"(","value":")" + b64(v) + "\"";
    if (lease) s += R"(,"lease":)" + number(lease);
    return s + "}}";
}
inline std::string get(const std::string& key) { return R"({"request_range":{"key":")" + b64(key) + "\"}}"; }
/// The end of the range of every key starting with `prefix` (etcd's prefix
/// range: the prefix with its last byte raised by one; prefixes here end in '/').
inline std::string prefix_end(std::string prefix) {
    prefix.back() = static_cast<char>(prefix.back() + 1);
    return prefix;
}
/// A range read of the keys in [key, end), with etcd's options (zero: not
/// set). etcd applies the create-revision bounds after it read the range,
/// then sorts and cuts to the limit: its count ignores the bounds.
struct range_options {
    std::string end;
    bool by_create = false;   ///< sorted by create revision (else by key)
    bool descending = false;
    std::int64_t limit = 0;
    std::int64_t min_create = 0, max_create = 0;
};
inline std::string range(const std::string& key, const range_options& o) {
    std::string s = R"({"request_range":{"key":")" + b64(key) + "\"";
    if (!o.end.empty()) s += R"(,"range_end":")" + b64(o.end) + "\"";
    if (o.by_create) s += R"(,"sort_target":"CREATE","sort_order":")" + std::string(o.descending ? "DESCEND" : "ASCEND") + "\"";
    if (o.limit) s += R"(,"limit":)" + number(o.limit);
    if (o.min_create) s += R"(,"min_create_revision":)" + number(o.min_create);
    if (o.max_create) s += R"(,"max_create_revision":)" + number(o.max_create);
    return s + "}}";
}
/// A compare over every key in [key, end): each one's create revision
/// `result` `rev` (etcd compares an empty range as one absent key: create
/// revision 0).
inline std::string created_in(const std::string& key, const std::string& end, const char* result, std::int64_t rev) {
    return R"({"target":"CREATE","key":")" + b64(key) + R"(","range_end":")" + b64(end) + R"(","result":")" + result +
           R"(","create_revision":)" + number(rev) + "}";
}
inline std::string del(const std::string& key) { return R"({"request_delete_range":{"key":")" + b64(key) + "\"}}"; }

inline std::string joined(const std::vector<std::string>& parts) {
    std::string s = "[";
    for (std::size_t i = 0; i < parts.size(); ++i) {
        if (i) s += ',';
        s += parts[i];
    }
    return s + "]";
}
inline std::string txn_body(const std::vector<std::string>& compare, const std::vector<std::string>& success,
                            const std::vector<std::string>& failure) {
    return R"({"compare":)" + joined(compare) + R"(,"success":)" + joined(success) + R"(,"failure":)" + joined(failure) + "}";
}
/// A transaction inside a transaction's branch (etcd 3.3 and later).
inline std::string nested(const std::vector<std::string>& compare, const std::vector<std::string>& success,
                          const std::vector<std::string>& failure) {
    return R"({"request_txn":)" + txn_body(compare, success, failure) + "}";
}

/// A transaction's answer: which branch ran, the revision after it, and the
/// key-values each range of that branch found (absent keys: empty).
struct txn_answer {
    bool succeeded = false;
    std::int64_t revision = 0;
    std::vector<std::optional<kv>> ranges;  // one per operation: the first key-value a range found (else nullopt)
    std::vector<std::vector<kv>> lists;     // one per operation: every key-value a range found
    std::vector<txn_answer> inner;          // the answers of nested transactions, in order
};

inline result<txn_answer> parse_txn(std::string_view body, bool top = true) {
    txn_answer out;
    out.succeeded = bool_member(body, "succeeded");
    auto header = member(body, "header");
    if (top && !header) return unexpected(coord::error(make_error_code(errc::bad_answer), "a transaction's answer has no header"));
    auto rev = header ? int_member(header->raw, "revision") : std::optional<std::int64_t>{0};
    if (!rev) return unexpected(coord::error(make_error_code(errc::bad_answer), "a transaction's revision is not a number"));
    out.revision = *rev;
    for (auto op : array_member(body, "responses")) {
        if (auto t = member(op, "response_txn")) {
            auto sub = parse_txn(t->raw, false);
            if (!sub) return sub;
            out.inner.push_back(std::move(*sub));
        }
        auto range = member(op, "response_range");
        out.lists.emplace_back();
        if (!range) {
            out.ranges.emplace_back();
            continue;
        }
        for (auto k : array_member(range->raw, "kvs")) {
            auto one = kv_of(k);
            if (!one) return unexpected(coord::error(make_error_code(errc::bad_answer), "a key-value etcd sent is malformed"));
            out.lists.back().push_back(std::move(*one));
        }
        if (out.lists.back().empty()) out.ranges.emplace_back();
        else out.ranges.emplace_back(out.lists.back().front());
    }
    return out;
}

/// A 64-bit number as 20 digits, so that etcd's byte-wise compares order numbers.
inline std::string padded(std::uint64_t v) {
    std::string s = std::to_string(v);
    return std::string(20 - s.size(), '0') + s;
}
inline std::optional<std::uint64_t> unpadded(std::string_view s) {
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
    return v;
}

/// Key names: "PREFIX/<kind>/<name>[/<part>]".
class keys {
public:
    explicit keys(const std::string& prefix) : prefix_(prefix + "/") {}
    std::string of(std::string_view kind, std::string_view name, std::string_view part = {}) const {
        std::string k = prefix_;
        k += kind;
        k += '/';
        k += name;
        if (!part.empty()) {
            k += '/';
            k += part;
        }
        return k;
    }
    const std::string& prefix() const noexcept { return prefix_; }
    /// The store's identity and floors (store::initialize): "PREFIX/identity".
    std::string identity() const { return prefix_ + "identity"; }

private:
    std::string prefix_;
};

/// A lease's term as the store reports it: etcd's seconds, or a test clock's.
struct term {
    std::int64_t ttl_ns = 0;
    std::int64_t expires_ns = 0;  ///< on the store's clock (see lease.hpp)
};

/// The pool, the keys and the clock driver, shared by the adapters of one store.
template <class Clock>
class context {
public:
    static constexpr bool test_clock = !std::is_same_v<Clock, server_clock>;

    /// Checks the URL and options (std::invalid_argument) and makes the
    /// pool; connections are opened as calls need them.
    context(std::string url, Clock clock, options opts)
        : pool_(std::move(url), std::move(opts)), clock_(std::move(clock)), keys_(pool_.opts().prefix) {}
    context(const context&) = delete;
    context& operator=(const context&) = delete;

    /// The pool of options::pool_size connections every call holds one of.
    pool& calls() noexcept { return pool_; }
    const pool& calls() const noexcept { return pool_; }
    const keys& key() const noexcept { return keys_; }

    result<txn_answer> txn(const std::vector<std::string>& compare, const std::vector<std::string>& success,
                           const std::vector<std::string>& failure, bool writes) {
        const std::int64_t before = seen_.load(std::memory_order_acquire);  // answered before this call was sent
        auto r = pool_.request("/v3/kv/txn", txn_body(compare, success, failure), writes);
        if (!r) return unexpected(r.error());
        auto a = parse_txn(*r);
        if (!a) return a;
        if (auto back = went_back(before, a->revision, writes)) return unexpected(std::move(*back));
        return a;
    }

    /// The store's identity key as this store object knows it: its text
    /// (the compare every call that needs the store's data makes) and its
    /// floors. Read when the store object opens and, until the store is
    /// initialized, again by each such call (one round trip).
    struct identity_known {
        std::string text;
        coord::detail::stated_floors floors;
    };
    result<identity_known> identity() {
        {
            std::lock_guard lk(identity_mutex_);
            if (!identity_.text.empty()) return identity_;
        }
        auto r = txn({}, {get(keys_.identity())}, {}, false);
        if (!r) return unexpected(r.error());
        if (r->ranges.empty() || !r->ranges[0]) return unexpected(identity_refusal(std::nullopt));
        return learn_identity(r->ranges[0]->value);
    }
    /// Records the identity key's value read (or written) by this store
    /// object; refused when it is not coord's.
    result<identity_known> learn_identity(const std::string& text) {
        auto parsed = coord::detail::parse_identity(text);
        if (!parsed)
            return unexpected(coord::error(coord::make_error_code(coord::errc::state_corrupt),
                                           "the identity key of the etcd store at " + pool_.url() + " (" + keys_.identity() +
                                               ") holds a value coord did not write"));
        std::lock_guard lk(identity_mutex_);
        identity_ = identity_known{text, parsed->floors};
        saw_identity_ = true;
        return identity_;
    }
    /// The compare a call that needs the store's data adds to its
    /// transaction: the identity key still holds what this store object knows.
    static std::string identity_is(const keys& k, const identity_known& id) { return value_is(k.identity(), id.text); }
    /// Why a call that needs the store's data is refused, from the identity
    /// key's value now (nullopt: absent): absent, the store lost its data
    /// (state_went_back to a store object that saw it; store_uninitialized
    /// otherwise: nothing is made again); another identity, it was
    /// initialized again (store_identity_changed); the same, nothing
    /// (nullopt: the call's other compares decide).
    std::optional<coord::error> identity_problem(const std::optional<kv>& now) {
        std::lock_guard lk(identity_mutex_);
        if (now && now->value == identity_.text) return std::nullopt;
        if (now && identity_.text.empty()) return std::nullopt;
        return identity_refusal_locked(now);
    }
    /// After a transaction that compared the identity was refused: reads
    /// the identity key and says what is wrong with it (nullopt: nothing,
    /// another compare refused; a failed read is the error).
    std::optional<coord::error> identity_changed() {
        auto r = txn({}, {get(keys_.identity())}, {}, false);
        if (!r) return r.error();
        return identity_problem(r->ranges.empty() ? std::nullopt : r->ranges[0]);
    }
    coord::error identity_refusal(const std::optional<kv>& now) {
        std::lock_guard lk(identity_mutex_);
        return identity_refusal_locked(now);
    }

    /// Lease tokens: an etcd revision (the holder key's create revision)
    /// plus the store's fence floor, so that a store initialized again after
    /// it went back (--fence-floor now: this machine's nanoseconds, far
    /// above any revision) grants only tokens above every earlier one.
    fence_token token_of(std::int64_t revision) const {
        std::lock_guard lk(identity_mutex_);
        return identity_.floors.fence + static_cast<fence_token>(revision);
    }
    /// The create revision of the grant whose token is `token` (0 for a
    /// token below the floor: no grant of this identity).
    std::int64_t revision_of(fence_token token) const {
        std::lock_guard lk(identity_mutex_);
        return token > identity_.floors.fence ? static_cast<std::int64_t>(token - identity_.floors.fence) : 0;
    }

    /// The highest revision a transaction's answer carried for this store
    /// object. A transaction (a write, or a linearizable read) is answered at
    /// a revision at least as high as every one answered before it was sent
    /// (calls at once may be answered in either order), while
    /// etcd keeps its history: a lower one means etcd's state went back (a
    /// snapshot restored onto the same endpoint, or another cluster answering
    /// there), and the call is refused with errc::state_went_back rather than
    /// answered from the older state. A write in that call was applied to the
    /// older state: the refusal says so. What a process started after the
    /// restore cannot tell: it never saw the higher revision (docs/concepts/went-back.md).
    std::int64_t highest_revision() const noexcept { return seen_.load(std::memory_order_relaxed); }

    /// The store's clock now, in ns: the test clock's reading, or this
    /// machine's (etcd shows no clock; terms measured from its answers).
    std::int64_t now_ns() const {
        if constexpr (test_clock) return since_epoch_ns(clock_.now());
        else return since_epoch_ns(std::chrono::system_clock::now());
    }

    /// What a grant's etcd term is longer than asked at least: a store
    /// object may give a released grant's lease to its next acquire without
    /// renewing it while at least the asked TTL is left (lease.hpp).
    static constexpr std::chrono::milliseconds reuse_margin{250};

    /// The TTL in seconds to grant for `ttl`: whole seconds, rounded up from
    /// ttl + reuse_margin (etcd raises it further to its minimum). A test
    /// clock's leases are granted an hour more, so that only the test clock
    /// ends them.
    static std::int64_t grant_seconds(std::chrono::nanoseconds ttl) {
        if constexpr (test_clock) {
            const auto s = std::chrono::ceil<std::chrono::seconds>(ttl).count();
            return (s < 1 ? 1 : s) + 3600;
        } else {
            const std::chrono::nanoseconds asked{coord::detail::add_saturated(ttl.count(), std::chrono::nanoseconds(reuse_margin).count())};
            const auto s = std::chrono::ceil<std::chrono::seconds>(asked).count();
            return s < 1 ? 1 : s;
        }
    }

    /// A new etcd lease for `ttl`: its ID and the term it got.
    result<std::pair<std::int64_t, term>> grant(std::chrono::nanoseconds ttl) {
        auto r = pool_.request("/v3/lease/grant", R"({"TTL":)" + number(grant_seconds(ttl)) + "}", true);
        if (!r) return unexpected(r.error());
        auto id = int_member(*r, "ID");
        auto got = int_member(*r, "TTL");
        if (!id || !got || *id == 0) return unexpected(coord::error(make_error_code(errc::bad_answer), "lease grant: " + *r));
        term t;
        const std::int64_t now = now_ns();
        if constexpr (test_clock) {
            t.ttl_ns = ttl.count();
            t.expires_ns = coord::detail::add_saturated(now, ttl.count());
            std::lock_guard lk(test_terms().mutex);
            test_terms().of[*id] = t;
        } else {
            t.ttl_ns = *got * 1'000'000'000;
            t.expires_ns = coord::detail::add_saturated(now, t.ttl_ns);
        }
        return std::pair{*id, t};
    }

    /// Renews a lease for its term (keepalive); nullopt when it ended.
    result<std::optional<term>> keepalive(std::int64_t id, std::chrono::nanoseconds ttl) {
        if constexpr (test_clock) {
            std::lock_guard lk(test_terms().mutex);
            auto it = test_terms().of.find(id);
            if (it == test_terms().of.end()) return std::optional<term>{};
            if (ttl.count() > 0) it->second.ttl_ns = ttl.count();
            it->second.expires_ns = coord::detail::add_saturated(now_ns(), it->second.ttl_ns);
            return std::optional<term>{it->second};
        } else {
            auto r = pool_.request("/v3/lease/keepalive", R"({"ID":)" + number(id) + "}", true);
            if (!r) return unexpected(r.error());
            auto result = member(*r, "result");
            auto left = result ? int_member(result->raw, "TTL") : std::optional<std::int64_t>{};
            if (!left) return unexpected(coord::error(make_error_code(errc::bad_answer), "lease keepalive: " + *r));
            if (*left <= 0) return std::optional<term>{};
            term t;
            t.ttl_ns = *left * 1'000'000'000;
            t.expires_ns = coord::detail::add_saturated(now_ns(), t.ttl_ns);
            return std::optional<term>{t};
        }
    }

    /// What is left of a lease's term (etcd's TimeToLive); nullopt when it ended.
    result<std::optional<term>> remaining(std::int64_t id) {
        if constexpr (test_clock) {
            std::lock_guard lk(test_terms().mutex);
            auto it = test_terms().of.find(id);
            if (it == test_terms().of.end()) return std::optional<term>{};
            return std::optional<term>{it->second};
        } else {
            auto r = pool_.request("/v3/lease/timetolive", R"({"ID":)" + number(id) + "}", false);
            if (!r) return unexpected(r.error());
            auto left = int_member(*r, "TTL");
            auto granted = int_member(*r, "grantedTTL");
            if (!left || !granted) return unexpected(coord::error(make_error_code(errc::bad_answer), "lease timetolive: " + *r));
            if (*left < 0) return std::optional<term>{};
            term t;
            t.ttl_ns = *granted * 1'000'000'000;
            t.expires_ns = coord::detail::add_saturated(now_ns(), *left * 1'000'000'000);
            return std::optional<term>{t};
        }
    }

    /// Ends a lease now (its keys are deleted). A lease already gone is not an error.
    result<void> revoke(std::int64_t id) {
        auto r = revoke_found(id);
        if (!r) return unexpected(r.error());
        return {};
    }

    /// Ends a lease now: true when it was there (its keys are deleted), false
    /// when it had already ended.
    result<bool> revoke_found(std::int64_t id) {
        if constexpr (test_clock) {
            std::lock_guard lk(test_terms().mutex);
            if (test_terms().of.erase(id) == 0) return false;
        }
        auto r = pool_.request("/v3/lease/revoke", R"({"ID":)" + number(id) + "}", true);
        if (!r) {
            if (r.error().detail().find("lease not found") != std::string::npos) return false;
            return unexpected(r.error());
        }
        return true;
    }

    /// A test clock: revokes the leases whose term ended on it (etcd's
    /// expiry, driven by the test's time). Nothing with server_clock.
    result<void> expire_due() {
        if constexpr (test_clock) {
            std::vector<std::int64_t> due;
            {
                std::lock_guard lk(test_terms().mutex);
                const std::int64_t now = now_ns();
                for (const auto& [id, t] : test_terms().of)
                    if (t.expires_ns <= now) due.push_back(id);
            }
            for (auto id : due)
                if (auto r = revoke(id); !r) return r;
        }
        return {};
    }

private:
    // A test clock's terms, per etcd lease (lease IDs are unique in a
    // cluster): one registry for the process, so that every store object on
    // the same test clock sees the same terms, as stores in other processes
    // see etcd's.
    struct terms_registry {
        std::mutex mutex;
        std::map<std::int64_t, term> of;
    };
    static terms_registry& test_terms() {
        static terms_registry r;
        return r;
    }

    coord::error identity_refusal_locked(const std::optional<kv>& now) const {
        const std::string where = "the etcd store at " + pool_.url() + " (" + keys_.prefix() + ")";
        const std::string recovery =
            "Unless the data can be put back, initialize the store again stating floors above everything it handed "
            "out, and reopen: coordctl store init --store URL --force --segment-floor N (at least the largest "
            "segment ID it ever handed out) --fence-floor N|now (at least the highest fence token any key accepted; "
            "now: this machine's time in nanoseconds, above every lease token etcd's revisions made) "
            "--ledger-floor none [--reservation-floor now]; docs/concepts/went-back.md";
        if (now)
            return coord::error(coord::make_error_code(coord::errc::store_identity_changed),
                                where + " was initialized again since this process opened it: open it again");
        if (saw_identity_)
            return coord::error(coord::make_error_code(coord::errc::state_went_back),
                                where + " lost its identity key, which this process saw: its keys were deleted (or "
                                        "the store was restored from before it was initialized), so fence records, "
                                        "segment counters, time reservations and token revocations may be gone; "
                                        "nothing is made again over them. " +
                                    recovery);
        return coord::error(coord::make_error_code(coord::errc::store_uninitialized),
                            where + " has no identity key: it was never initialized, or it lost its data; nothing "
                                    "that needs its data is answered. A store that never served coord: coordctl "
                                    "store init --store URL --segment-floor 0 --fence-floor 0 --ledger-floor none. " +
                                recovery);
    }

    // `before`: the highest revision answered before the call was sent;
    // `writes`: whether the call's transaction could write.
    std::optional<coord::error> went_back(std::int64_t before, std::int64_t revision, bool writes) {
        auto seen = seen_.load(std::memory_order_relaxed);
        while (revision > seen && !seen_.compare_exchange_weak(seen, revision, std::memory_order_acq_rel)) {
        }
        if (revision >= before) return std::nullopt;
        return coord::error(coord::make_error_code(coord::errc::state_went_back),
                            "etcd answered at revision " + std::to_string(revision) + ", below the " +
                                std::to_string(before) + " it answered this store object before: its state went back (a "
                                "snapshot restored onto this endpoint?), and tokens and IDs handed out since could be "
                                "handed out again. Refused; " +
                                std::string(writes ? "a write in this call may have landed on the older state"
                                                   : "this call only read, and wrote nothing") +
                                ". See docs/concepts/went-back.md");
    }

    pool pool_;
    Clock clock_;
    keys keys_;
    std::atomic<std::int64_t> seen_{0};
    mutable std::mutex identity_mutex_;
    identity_known identity_;   // empty text: not known yet
    bool saw_identity_ = false;  // this store object read or wrote an identity
};

inline coord::error bad(const std::string& what) { return coord::error(make_error_code(errc::bad_answer), what); }
/// A compare-and-set that lost to other writers on every try (`what` names
/// the call: "segment allocate").
inline coord::error contention(std::string_view what, int tries = coord::detail::conflict_tries) {
    return coord::detail::conflicts_in_a_row(make_error_code(errc::contention), what, tries);
}

}  // namespace coord::etcd::detail
