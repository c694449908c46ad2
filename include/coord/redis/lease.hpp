// SPDX-License-Identifier: Apache-2.0
// coord/redis/lease.hpp: lease_store and lease_queue_store on Redis.
//
// Round trips: every operation 1, one script applying the rule of
// coord/rules/lease.hpp to the name's hash, its term judged on the server's
// TIME. A new token is the larger of the last token + 1 and the server's
// time in microseconds: tokens never go back, also when Redis lost the
// lease's record (a restart without persistence, a failover to a replica
// without the last writes), as long as the server's clock does not go back
// further than the time between the lost grant and the next one.
//
// The waiting acquire: the line is a sorted set of tickets and a hash of
// places (each a short lease of its own); enqueue, the queued acquire and
// dequeue are one script each. A waiter SUBSCRIBEs to its place's own
// channel ({prefix}:lw:<name>:<ticket>) on a connection of the listener
// pool, then checks that it still needs to wait (a release just before the
// SUBSCRIBE is not missed); a release, or a waiter leaving, PUBLISHes only to
// the first live place, so a release wakes one waiter, not all.
#pragma once

#ifndef COORD_STORE_HEADER_INCLUDED
#define COORD_STORE_HEADER_INCLUDED 1
#endif

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coord/detail/lease_poll.hpp"
#include "coord/lease.hpp"
#include "coord/redis/context.hpp"
#include "coord/redis/scripts.hpp"

namespace coord::redis {

template <class Clock>
class lease_adapter {
public:
    explicit lease_adapter(detail::context<Clock>& ctx) noexcept : ctx_(ctx) {}

    result<lease, lease_error> lease_acquire(std::string_view name, std::string_view owner, std::chrono::nanoseconds ttl) {
        return call(scripts::lease_acquire, name, {lease_key(name)},
                    {ctx_.now(), std::string(owner), detail::ns_arg(ttl.count())});
    }
    result<lease, lease_error> lease_renew(std::string_view name, std::string_view owner, fence_token token,
                                           std::chrono::nanoseconds ttl) {
        return call(scripts::lease_renew, name, {lease_key(name)},
                    {ctx_.now(), std::string(owner), std::to_string(token), detail::ns_arg(ttl.count())});
    }
    result<void, lease_error> lease_release(std::string_view name, std::string_view owner, fence_token token) {
        auto r = call(scripts::lease_release, name, {lease_key(name), line_key(name), places_key(name)},
                      {ctx_.now(), std::string(owner), std::to_string(token), channel_prefix(name)});
        if (!r) return unexpected(r.error());
        return {};
    }
    result<std::optional<lease>> lease_read(std::string_view name) {
        pool::call c(ctx_.calls());
        auto r = c.eval(scripts::lease_read, {lease_key(name)}, {ctx_.now()}, false);
        if (!r) return unexpected(r.error());
        if (detail::element(r->get(), 0) == "NONE") return std::optional<lease>{};
        auto l = lease_of(name, r->get());
        if (!l || detail::elements(r->get()) != 5) return unexpected(detail::bad_reply("lease read"));
        return std::optional<lease>{std::move(*l)};
    }

    result<std::uint64_t> lease_enqueue(std::string_view name, std::string_view who, std::chrono::nanoseconds place_ttl) {
        pool::call c(ctx_.calls());
        auto r = c.eval(scripts::lease_enqueue, {line_key(name), places_key(name), lease_key(name)},
                        {ctx_.now(), std::string(who), detail::ns_arg(place_ttl.count())}, true);
        if (!r) return unexpected(r.error());
        const auto t = detail::u64_of(detail::element(r->get(), 1));
        if (!t) return unexpected(detail::bad_reply("lease enqueue"));
        return *t;
    }
    result<lease, lease_error> lease_acquire_queued(std::string_view name, std::string_view owner, std::chrono::nanoseconds ttl,
                                                    std::uint64_t ticket, std::chrono::nanoseconds place_ttl) {
        return call(scripts::lease_acquire_queued, name, {lease_key(name), line_key(name), places_key(name)},
                    {ctx_.now(), std::string(owner), detail::ns_arg(ttl.count()), std::to_string(ticket),
                     detail::ns_arg(place_ttl.count()), detail::ns_arg(place_ttl.count() / 2)});
    }
    result<void> lease_dequeue(std::string_view name, std::uint64_t ticket) {
        pool::call c(ctx_.calls());
        auto r = c.eval(scripts::lease_dequeue, {line_key(name), places_key(name)},
                        {ctx_.now(), std::to_string(ticket), channel_prefix(name)}, true);
        if (!r) return unexpected(r.error());
        return {};
    }
    result<std::vector<lease_waiter>> lease_queue_read(std::string_view name) {
        pool::call c(ctx_.calls());
        auto r = c.eval(scripts::lease_queue_read, {line_key(name), places_key(name)}, {ctx_.now()}, false);
        if (!r) return unexpected(r.error());
        const std::size_t n = detail::elements(r->get());
        if (n == 0 || (n - 1) % 3 != 0) return unexpected(detail::bad_reply("lease queue read"));
        std::vector<lease_waiter> out;
        for (std::size_t i = 1; i + 2 < n; i += 3) {
            const auto t = detail::u64_of(detail::element(r->get(), i));
            const auto until = detail::i64_of(detail::element(r->get(), i + 2));
            if (!t || !until) return unexpected(detail::bad_reply("lease queue read"));
            out.push_back(lease_waiter{*t, std::string(detail::element(r->get(), i + 1)), *until});
        }
        return out;
    }
    void lease_wait(std::string_view name, std::uint64_t ticket, std::size_t ahead,
                    std::chrono::steady_clock::time_point until) {
        pool::call listener(ctx_.listeners());
        const std::string channel = channel_prefix(name) + std::to_string(ticket);
        auto ready_now = [&] {
            pool::call c(ctx_.calls());
            auto r = c.eval(scripts::lease_next_in_line, {lease_key(name), line_key(name), places_key(name)},
                            {ctx_.now(), std::to_string(ticket)}, false);
            return !r || detail::element(r->get(), 0) == "1";
        };
        auto waited = listener.wait_message(channel, ready_now, until);
        // No listener connection or the server unreachable: wait as a polled
        // store does rather than ask again at once.
        if (!waited) coord::detail::lease_poll_wait(ahead, until);
    }

private:
    std::string lease_key(std::string_view name) const { return ctx_.key().of("lease", name); }
    std::string line_key(std::string_view name) const { return ctx_.key().of("lease-line", name); }
    std::string places_key(std::string_view name) const { return ctx_.key().of("lease-places", name); }
    std::string channel_prefix(std::string_view name) const {
        std::string c = ctx_.key().of("lw", name);
        c += ':';
        return c;
    }

    static std::optional<lease> lease_of(std::string_view name, const redisReply* r) {
        const auto token = detail::u64_of(detail::element(r, 2));
        const auto ttl = detail::i64_of(detail::element(r, 3));
        const auto exp = detail::i64_of(detail::element(r, 4));
        if (!token || !ttl || !exp) return std::nullopt;
        return lease{std::string(name), std::string(detail::element(r, 1)), *token, std::chrono::nanoseconds{*ttl},
                     std::chrono::nanoseconds{*exp}};
    }

    // {status, holder, token, ttl, exp, now, ahead}: OK granted; H held, N
    // not the holder, X expired, L the waiter's place lapsed.
    result<lease, lease_error> call(const detail::script& s, std::string_view name, std::vector<std::string> keys,
                                    std::vector<std::string> args) {
        pool::call c(ctx_.calls());
        auto r = c.eval(s, keys, args, true);
        if (!r) return unexpected(lease_error{r.error(), {}, 0, {}});
        auto l = lease_of(name, r->get());
        const auto now = detail::i64_of(detail::element(r->get(), 5));
        const auto ahead = detail::u64_of(detail::element(r->get(), 6));
        if (detail::elements(r->get()) != 7 || !l || !now || !ahead)
            return unexpected(lease_error{detail::bad_reply("a lease script"), {}, 0, {}});
        const auto status = detail::element(r->get(), 0);
        if (status == "OK") return std::move(*l);
        const coord::errc code = status == "H"   ? coord::errc::lease_held
                                 : status == "X" ? coord::errc::lease_expired
                                 : status == "L" ? coord::errc::wait_place_lost
                                                 : coord::errc::not_lease_holder;
        lease_error e{coord::make_error_code(code), l->owner, l->token, l->expires_at};
        e.ahead = static_cast<std::size_t>(*ahead);
        e.now = std::chrono::nanoseconds{*now};
        return unexpected(std::move(e));
    }

    detail::context<Clock>& ctx_;
};

}  // namespace coord::redis
