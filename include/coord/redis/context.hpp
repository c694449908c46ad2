// SPDX-License-Identifier: Apache-2.0
// coord/redis/context.hpp: what every adapter of the Redis engine shares:
// the pools, the clock, the key names (one hash tag per store), the store's
// identity as this process opened it, and the one way a script that needs the
// store's data is called (the identity checked inside the script).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "coord/clock.hpp"
#include "coord/detail/options.hpp"
#include "coord/initial_floors.hpp"
#include "coord/redis/connection.hpp"

namespace coord::redis::detail {

/// Key names. Every key is "{prefix}:<kind>:<name>": one hash tag, so that
/// the keys of any call (and the identity key) share a Redis Cluster slot.
class keys {
public:
    explicit keys(const std::string& prefix) : tag_("{" + prefix + "}:") {}
    /// "{prefix}:" (scripts build a few names from it).
    const std::string& tag() const noexcept { return tag_; }
    std::string of(std::string_view kind, std::string_view name) const {
        std::string k = tag_;
        k += kind;
        k += ':';
        k += name;
        return k;
    }
    std::string identity() const { return tag_ + "identity"; }
    /// The store's generation: one more for every call that can hand
    /// something out (scripts.hpp, "The store's generation").
    std::string generation() const { return tag_ + "generation"; }
    /// A store object's count of its writes (scripts.hpp, "The store's generation").
    std::string writer(std::string_view id) const { return of("writer", id); }

private:
    std::string tag_;
};

/// The clock argument of a script: '' for the server's clock (the script
/// reads TIME), else the test clock's reading in ns (before 1970 read as 0).
template <class Clock>
std::string now_arg(const Clock& clock) {
    if constexpr (std::is_same_v<Clock, server_clock>) {
        return {};
    } else {
        const auto ns = since_epoch_ns(clock.now());
        return std::to_string(ns < 0 ? 0 : ns);
    }
}

/// A duration as a script argument: non-negative nanoseconds.
inline std::string ns_arg(std::int64_t ns) { return std::to_string(ns < 0 ? 0 : ns); }

/// A reply that is not what the script returns.
inline coord::error bad_reply(const char* what) {
    return coord::error(make_error_code(errc::bad_answer), std::string("unexpected reply to ") + what);
}

/// The pools, the clock and the identity, shared by the adapters of one
/// store, built once per store before the adapters.
template <class Clock>
class context {
public:
    context(std::string url, Clock clock, options opts)
        : calls_(url, opts),
          listeners_(std::move(url), coord::detail::listener_options(std::move(opts))),
          clock_(std::move(clock)),
          keys_(calls_.opts().prefix) {}
    context(const context&) = delete;
    context& operator=(const context&) = delete;

    /// The pool of options::pool_size connections every call holds one of.
    pool& calls() noexcept { return calls_; }
    const pool& calls() const noexcept { return calls_; }
    /// Waiting acquires hold a subscribed connection for their wait: a pool
    /// of their own, so that waiters never starve the calls.
    pool& listeners() noexcept { return listeners_; }
    const keys& key() const noexcept { return keys_; }
    std::string now() const { return now_arg(clock_); }

    /// The identity this store object works under: the one read when it
    /// opened, or (when the store was not initialized then) the one read now.
    std::string identity() {
        std::lock_guard lk(mutex_);
        return identity_;
    }
    void set_identity(std::string id) {
        std::lock_guard lk(mutex_);
        identity_ = std::move(id);
    }

    /// Runs a script that needs the store's data: KEYS[1] is the identity
    /// key and ARGV[1] (or ARGV[2] after the clock, when `clocked`) the
    /// identity expected; the script answers 'U' or 'C' when it is absent or
    /// another, and 'B' when a key it reads holds no record of coord's (the
    /// answer, or its first element, is the status). An identity not yet
    /// known is read first (one round trip, only until the store is
    /// initialized).
    result<reply> checked(pool::call& c, const script& s, std::vector<std::string> more_keys,
                          std::vector<std::string> args, bool writes, bool clocked = false) {
        return checked(c, s, std::move(more_keys), std::move(args), writes, clocked,
                       [](const std::string& id) { return id; });
    }
    /// The same, the identity's argument made by `with_identity(id)` (a
    /// script may take the identity inside a larger argument).
    template <class WithIdentity>
    result<reply> checked(pool::call& c, const script& s, std::vector<std::string> more_keys,
                          std::vector<std::string> args, bool writes, bool clocked, WithIdentity&& with_identity) {
        auto id = known_identity(c);
        if (!id) return unexpected(id.error());
        std::vector<std::string> ks;
        ks.reserve(more_keys.size() + 1);
        ks.push_back(keys_.identity());
        for (auto& k : more_keys) ks.push_back(std::move(k));
        args.insert(args.begin() + (clocked ? 1 : 0), with_identity(*id));
        return guarded(c, s, std::move(ks), std::move(args), writes);
    }

    /// Runs a script that counts the store's generation (scripts.hpp, "The
    /// store's generation"): this store object's writer key and the
    /// generation's go last, then the number of its last write acknowledged,
    /// this write's number (0 for a read) and the highest generation it saw;
    /// the answer comes back without the generation (kept when it is
    /// higher), and a store that went back (below the generation, or without
    /// a write this store object saw acknowledged) is
    /// errc::state_went_back, then for every call of this
    /// store object (store_uninitialized when its identity key is gone too,
    /// store_identity_changed when it was initialized again).
    result<reply> guarded(pool::call& c, const script& s, std::vector<std::string> ks, std::vector<std::string> args,
                          bool writes) {
        if (auto back = went_back()) return unexpected(*back);
        const std::int64_t saw = seen_.load(std::memory_order_relaxed);
        // Quiet for long (its key may have expired): nothing it wrote before
        // is asked for (nor after this store object initialized the store:
        // initialized()).
        const auto now = coord::detail::deadline_clock::now().time_since_epoch().count();
        if (now - written_at_.load(std::memory_order_relaxed) > writer_checked_for.count())
            acknowledged_.store(0, std::memory_order_relaxed);
        const std::int64_t next = writes ? sent_.fetch_add(1, std::memory_order_relaxed) + 1 : 0;
        if (writes) written_at_.store(now, std::memory_order_relaxed);
        ks.push_back(keys_.writer(writer_));
        ks.push_back(keys_.generation());
        const std::int64_t lo = acknowledged_.load(std::memory_order_relaxed);
        args.push_back(std::to_string(lo));
        args.push_back(std::to_string(next));
        args.push_back(std::to_string(saw));
        auto r = c.eval(s, ks, args, writes);
        if (!r) return r;
        redisReply* top = r->get();
        if (top->type != REDIS_REPLY_ARRAY || top->elements != 2 || top->element[0]->type != REDIS_REPLY_INTEGER)
            return unexpected(bad_reply("a script counting the store's generation"));
        const std::int64_t generation = top->element[0]->integer;
        reply answer(top->element[1]);
        top->element[1] = nullptr;
        top->elements = 1;
        *r = std::move(answer);
        const auto status = (*r)->type == REDIS_REPLY_ARRAY ? element(r->get(), 0) : text(r->get());
        if (status == "W")
            return unexpected(went_back_from(c, "its generation is " + std::to_string(generation) + ", below the " +
                                                    std::to_string(saw) + " this process saw"));
        if (status == "L")
            return unexpected(went_back_from(c, "a write this process saw acknowledged is gone (its count of writes " +
                                                    keys_.writer(writer_) + " is below " + std::to_string(lo) + ")"));
        if (writes) raise(acknowledged_, next);  // the script set it
        saw_generation(generation);
        return judged(std::move(r));
    }

    /// This store object initialized the store: it works under the new
    /// identity, and a rollback it saw before is behind it.
    void initialized(std::string id) {
        std::lock_guard lk(mutex_);
        identity_ = std::move(id);
        went_back_.reset();
        acknowledged_.store(0, std::memory_order_relaxed);
    }

    /// Raises the highest generation this store object saw to `g`.
    void saw_generation(std::int64_t g) noexcept { raise(seen_, g); }

    /// The refusal every call of this store object answers once the store
    /// was seen to go back (none before).
    std::optional<coord::error> went_back() {
        std::lock_guard lk(mutex_);
        return went_back_;
    }

    /// The identity this store object works under, read first when not yet
    /// known (one round trip, only until the store is initialized).
    result<std::string> known_identity(pool::call& c) {
        std::string id = identity();
        if (!id.empty()) return id;
        auto r = c.command({"GET", keys_.identity()}, false);
        if (!r) return unexpected(r.error());
        if ((*r)->type != REDIS_REPLY_STRING)
            return unexpected(coord::error(coord::make_error_code(coord::errc::store_uninitialized), uninitialized_words()));
        const std::string_view value = text(r->get());
        if (!well_formed_identity(value))
            return unexpected(coord::error(coord::make_error_code(coord::errc::state_corrupt),
                                           "the identity key of the Redis store at " + calls_.url() + " (" + keys_.tag() +
                                               ") holds a value coord did not write (an identity is 32 hex digits)"));
        id = std::string(value.substr(0, 32));
        set_identity(id);
        return id;
    }

    /// An identity key's value as initialize() writes it: 32 lowercase hex
    /// digits (the identity), then its floors, ":<segment>:<fence: 20
    /// digits>:<ledger ms>:<reservation ms>" (scripts.hpp, "Floors"; a key
    /// written by an earlier coord has none). The fence record's layout
    /// depends on the identity's length, so an identity key holding anything
    /// else is never used.
    static bool well_formed_identity(std::string_view v) noexcept {
        return coord::detail::parse_identity(v).has_value();
    }

    /// A script's answer with its status ('B', 'U', 'C') made the error it names.
    result<reply> judged(result<reply> r) const {
        if (!r) return r;
        const auto status = (*r)->type == REDIS_REPLY_ARRAY ? element(r->get(), 0) : text(r->get());
        if (status == "B")
            return unexpected(coord::error(coord::make_error_code(coord::errc::state_corrupt),
                                           "a key of the Redis store at " + calls_.url() + " (" + keys_.tag() +
                                               ") holds a value coord did not write there (another program, or an "
                                               "older coord's layout); nothing was changed"));
        if (status == "U")
            return unexpected(coord::error(coord::make_error_code(coord::errc::store_uninitialized), uninitialized_words()));
        if (status == "C")
            return unexpected(coord::error(coord::make_error_code(coord::errc::store_identity_changed),
                                           "the Redis store at " + calls_.url() + " (" + keys_.tag() +
                                               ") was initialized again since this process opened it"));
        return r;
    }

private:
    // The writer is checked only within this long of its last write: its
    // key lives 7 days after it (scripts.hpp), and a day is the margin for
    // the two machines' clocks.
    static constexpr auto writer_checked_for =
        std::chrono::duration_cast<coord::detail::deadline_clock::duration>(std::chrono::hours(24 * 6));

    static void raise(std::atomic<std::int64_t>& a, std::int64_t v) noexcept {
        for (std::int64_t known = a.load(std::memory_order_relaxed); v > known && !a.compare_exchange_weak(known, v);) {
        }
    }

    // A generation below what this store object saw, or its count of its
    // writes below what it wrote (`why`): the identity key says whether the
    // store lost everything (store_uninitialized, as for a store never
    // initialized: the next call asks again), was initialized again since
    // (store_identity_changed) or went back to an older state
    // (state_went_back, kept for every later call: other clients' calls may
    // raise the generation again, not bring back what was lost).
    coord::error went_back_from(pool::call& c, const std::string& why) {
        auto id = c.command({"GET", keys_.identity()}, false);
        if (!id) return id.error();
        if ((*id)->type != REDIS_REPLY_STRING)
            return coord::error(coord::make_error_code(coord::errc::store_uninitialized), uninitialized_words());
        if (const std::string known = identity(); !known.empty() && text(id->get()).substr(0, 32) != known)
            return coord::error(coord::make_error_code(coord::errc::store_identity_changed),
                                "the Redis store at " + calls_.url() + " (" + keys_.tag() +
                                    ") was initialized again since this process opened it");
        coord::error e(coord::make_error_code(coord::errc::state_went_back),
                       "the Redis store at " + calls_.url() + " (keys " + keys_.tag() + ") went back: " + why +
                           " (the server restarted from an older append-only file or snapshot, or a "
                           "replica that missed writes took over), so fence records, segment counters, ledger "
                           "records, time reservations and token revocations may be older than answers already "
                           "given; nothing was answered from the older state, and this store object refuses every "
                           "call that needs them from now on. Unless the newer data can be put back, initialize the "
                           "store again stating floors above everything it handed out, and reopen: coordctl store "
                           "init --store URL --force --segment-floor N (at least the largest segment ID it ever "
                           "handed out) --fence-floor now (the server's time in microseconds, above every lease "
                           "token it granted) --ledger-floor now [--reservation-floor now]; docs/concepts/went-back.md");
        std::lock_guard lk(mutex_);
        if (!went_back_) went_back_ = e;
        return *went_back_;
    }

    std::string uninitialized_words() const {
        return "the Redis store at " + calls_.url() + " (keys " + keys_.tag() +
               ") has no identity key: it was never initialized, or it lost its data (fence records, segment "
               "counters, ledger records, time reservations and token revocations may be gone), so nothing that "
               "needs them is answered. Initialize it stating floors above everything it handed out, and nothing "
               "is handed out again: coordctl store init --store URL --segment-floor N (at least the largest "
               "segment ID it ever handed out) --fence-floor N|now (at least the highest fence token it accepted; "
               "now: the server's time in microseconds, above every lease token it granted) --ledger-floor "
               "INSTANT|now (slots scheduled up to it are not run again; none for a store that never served "
               "coord) [--reservation-floor INSTANT|now] (time reservations restart there; default now); "
               "docs/stores/redis.md: When a store lost its data";
    }

    pool calls_;
    pool listeners_;
    Clock clock_;
    keys keys_;
    std::mutex mutex_;
    std::string identity_;
    std::optional<coord::error> went_back_;
    std::atomic<std::int64_t> seen_{0};
    // The writer (scripts.hpp, "The store's generation"): its key's name,
    // the number of the last write sent, the highest one acknowledged, and
    // this machine's time of the last write sent.
    std::string writer_ = coord::detail::new_store_identity();
    std::atomic<std::int64_t> sent_{0};
    std::atomic<std::int64_t> acknowledged_{0};
    std::atomic<coord::detail::deadline_clock::rep> written_at_{0};
};

}  // namespace coord::redis::detail
