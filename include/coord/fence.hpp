// SPDX-License-Identifier: Apache-2.0
// coord/fence.hpp: the fenced resource, the side of a lease that refuses a
// stale holder's write (Chubby's sequencers, Kleppmann's fencing tokens).
//
// A lease cannot stop a holder that paused past its expiry from writing when
// it wakes: it does not know it lost the lease. Only the resource that accepts
// the write can refuse it. Every lease grant carries a fence token larger than
// any before it; the resource remembers the highest token it has accepted and,
// in the same atomic step as the write, refuses any write whose token is lower.
//
//   #include <coord/aliases.hpp>  // memory_store and the everyday aliases
//   coord::memory_store store;
//   coord::fenced_resource res{store, "orders/primary"};
//   res.write(42, "B");                                   // accepted
//   auto r = res.write(41, "A");                          // errc::stale_fence
//   res.read()->value;                                    // still "B"
//
// What a fence cannot do: a resource that has not yet seen the newer token
// cannot know the older one expired (the first write of the new holder is
// what teaches it); and one holder's own requests that arrive out of order
// carry the same token, so order among them needs the sequence form,
// write(token, seq, value).
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <utility>

#include "coord/detail/text.hpp"
#include "coord/error.hpp"
#include "coord/result.hpp"
#include "coord/rules/fence.hpp"

namespace coord {

namespace detail {
/// A callable that a fenced update passes the value to, for concept checks.
struct update_archetype {
    void operator()(std::string&) const {}
};
}  // namespace detail

/// A store that keeps, per key, the highest fence token accepted and a value.
///
/// Semantic requirements the compiler cannot check:
/// - fence_write(key, token, value) is ONE atomic step: it compares token with
///   the key's highest fence and, if token >= highest, stores the value and
///   records token as highest; otherwise it returns errc::stale_fence (with the
///   highest) and changes nothing. Equal tokens may write again.
/// - fence_write(key, token, seq, value) additionally refuses with
///   errc::stale_sequence a pair (token, seq) not strictly above the last
///   accepted ordered pair of that token.
/// - The highest fence of a key never goes back: not across threads,
///   processes, or restarts of a durable store.
/// - A transport or I/O failure returns that error in write_error::code and
///   is never reported as accepted; when the write may have been applied
///   anyway the code is errc::outcome_unknown.
template <class S>
concept fence_store = requires(S& s, std::string_view key, fence_token t, std::uint64_t seq, std::string_view v) {
    { s.fence_write(key, t, v) } -> std::same_as<result<void, write_error>>;
    { s.fence_write(key, t, seq, v) } -> std::same_as<result<void, write_error>>;
    { s.fence_read(key) } -> std::same_as<result<fenced_value>>;
};

/// A fence store that can also run a caller's function on the value inside
/// the atomic step (read-modify-write under the fence). The function must not
/// call back into the store.
///
/// What engines and callers must know:
/// - fn(value&) runs only when the token passes the fence. It may run more
///   than once for one call: an engine that applies the update by
///   compare-and-set (read, fn, write if unchanged) runs fn again on the
///   fresh value when another writer got in between. So fn must be a pure
///   function of the value it is given (no side effects outside it); the
///   value that is stored is the one fn produced on the value that was
///   current when the step took effect.
/// - If fn throws, nothing is stored and the exception propagates.
/// - When the engine cannot tell whether the write applied (the connection
///   broke after it was sent), the result is errc::outcome_unknown: read the
///   value back (fence_read) before deciding to apply fn again.
template <class S>
concept fence_update_store = fence_store<S> && requires(S& s, std::string_view key, fence_token t) {
    { s.fence_update(key, t, detail::update_archetype{}) } -> std::same_as<result<void, write_error>>;
};

/// Many named resources, each with its own fence, in one store.
/// Thread safety: as safe as the store (every model in coord is thread-safe).
/// Holds a reference: the store must outlive it.
template <fence_store Store>
class basic_keyed_fenced_resource {
public:
    /// Fenced resources on `store`, which must outlive this object.
    explicit basic_keyed_fenced_resource(Store& store) noexcept : store_(&store) {}

    /// Stores `value` under `key` if `token` is at least the key's highest
    /// fence, and records `token` as the highest. Refusals:
    /// errc::stale_fence (value untouched), or the store's I/O error.
    /// Cost: one atomic store operation.
    result<void, write_error> write(std::string_view key, fence_token token, std::string_view value) {
        check_key(key);
        return store_->fence_write(key, token, value);
    }

    /// As write(key, token, value), and also refuses with
    /// errc::stale_sequence when (token, seq) is not above the last ordered
    /// write accepted for this key: for a holder whose own requests can
    /// arrive out of order.
    result<void, write_error> write(std::string_view key, fence_token token, std::uint64_t seq,
                                    std::string_view value) {
        check_key(key);
        return store_->fence_write(key, token, seq, value);
    }

    /// Runs fn(value&) on the key's value inside the atomic step when
    /// `token` passes the fence; same refusals as write().
    template <class F>
        requires fence_update_store<Store> && std::invocable<F&, std::string&>
    result<void, write_error> update(std::string_view key, fence_token token, F&& fn) {
        check_key(key);
        return store_->fence_update(key, token, std::forward<F>(fn));
    }

    /// The key's value and highest fence.
    result<fenced_value> read(std::string_view key) const {
        check_key(key);
        return store_->fence_read(key);
    }

private:
    // A key is a name: non-empty, at most max_name_size bytes, valid UTF-8
    // without NUL (the same answer on every store). Values are bytes and may hold anything.
    static void check_key(std::string_view key) {
        detail::check_name("coord::fence: key", key);
    }
    Store* store_;
};

/// One named resource with its own fence: basic_keyed_fenced_resource bound
/// to a key. Thread safety and lifetime: as the keyed form.
template <fence_store Store>
class basic_fenced_resource {
public:
    /// The fenced resource `key` on `store`, which must outlive this object.
    basic_fenced_resource(Store& store, std::string key) : res_(store), key_(std::move(key)) {}

    /// See basic_keyed_fenced_resource::write.
    result<void, write_error> write(fence_token token, std::string_view value) {
        return res_.write(key_, token, value);
    }
    /// See basic_keyed_fenced_resource::write with a sequence.
    result<void, write_error> write(fence_token token, std::uint64_t seq, std::string_view value) {
        return res_.write(key_, token, seq, value);
    }
    /// See basic_keyed_fenced_resource::update.
    template <class F>
        requires fence_update_store<Store> && std::invocable<F&, std::string&>
    result<void, write_error> update(fence_token token, F&& fn) {
        return res_.update(key_, token, std::forward<F>(fn));
    }
    /// The value and highest fence.
    result<fenced_value> read() const { return res_.read(key_); }
    /// The resource's key.
    const std::string& key() const noexcept { return key_; }

private:
    basic_keyed_fenced_resource<Store> res_;
    std::string key_;
};

}  // namespace coord
