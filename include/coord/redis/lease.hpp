// SPDX-License-Identifier: Apache-2.0
// coord/redis/lease.hpp: lease_store and lease_queue_store on Redis.
//
// Round trips: every operation 1, one script applying the rule of
// coord/rules/lease.hpp to the name's record, its term judged on the
// server's TIME; a release 2 when someone joined the name's line since its
// last release (the first script finds that and changes nothing, the second
// releases and wakes the first waiter). A new token is the larger of the
// last token + 1 and the server's time in microseconds: tokens never go back, also when Redis lost the
// lease's record (a restart without persistence, a failover to a replica
// without the last writes), as long as the server's clock does not go back
// further than the time between the lost grant and the next one.
//
// The waiting acquire: the line is a sorted set of places in arrival order,
// a sorted set of their ends and a ticket counter (each place a short lease
// of its own); enqueue, the queued acquire and dequeue are one script each, and
// keeping a place costs the same however long the line is (scripts.hpp). A
// waiter SUBSCRIBEs to its place's own channel ({prefix}:lw:<name>:<ticket>)
// on a connection of the listener pool, for as long as it waits, and then
// checks once that it still needs to wait (a release just before the
// SUBSCRIBE is not missed); a release, or a waiter leaving, PUBLISHes only to
// the first live place, so a release wakes one waiter, not all. While nobody
// moves, a waiter costs 5 commands per renewal of its place (every half of
// the place's term): the queued acquire and the commands inside it.
//
// An observer (lease_watching: election's observe) SUBSCRIBEs to the channel
// named as the lease's key and sets the record's w, so that a grant and a
// release PUBLISH there (in the one script each already runs: a release then
// takes 2 round trips, as with someone in line); the first release that finds
// no subscriber and nobody in line clears w, and the fast paths are back.
#pragma once

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
        // The record's middle: " <n>\n<owner> <ttl> ".
        std::string middle;
        append_holder(middle, owner);
        middle += detail::ns_arg(ttl.count());
        middle += ' ';
        std::vector<std::string> args{std::move(middle)};
        std::string sent = ctx_.now();
        if (!sent.empty()) args.push_back(sent);
        pool::call c(ctx_.calls());
        auto r = c.eval(scripts::lease_acquire, {lease_key(name)}, args, true);
        if (!r) return unexpected(lease_error{r.error(), {}, 0, {}});
        const std::string_view text = detail::text(r->get());
        if (text.empty() || text.front() < '0' || text.front() > '9') return outcome(name, owner, r->get());
        // A grant on the common path: its token alone; the term starts at the
        // reading sent, or at the token's microsecond (the server's TIME).
        const auto token = detail::u64_of(text);
        constexpr std::uint64_t max_us = static_cast<std::uint64_t>(INT64_MAX) / 1000;
        const auto start = !sent.empty() ? detail::i64_of(sent)
                           : token && *token <= max_us ? std::optional<std::int64_t>(static_cast<std::int64_t>(*token) * 1000)
                                                       : std::nullopt;
        if (!token || !start) return unexpected(lease_error{detail::bad_reply("lease acquire"), {}, 0, {}});
        const auto term = std::chrono::nanoseconds{ttl.count() < 0 ? 0 : ttl.count()};
        return lease{std::string(name), std::string(owner), *token, term,
                     std::chrono::nanoseconds{coord::detail::add_saturated(*start, term.count())}};
    }
    result<lease, lease_error> lease_renew(std::string_view name, std::string_view owner, fence_token token,
                                           std::chrono::nanoseconds ttl) {
        return call(scripts::lease_renew, name, owner, {lease_key(name)},
                    {ctx_.now(), std::string(owner), std::to_string(token), detail::ns_arg(ttl.count())});
    }
    result<void, lease_error> lease_release(std::string_view name, std::string_view owner, fence_token token) {
        if (token != 0) {
            // One command when nobody joined the name's line since its last
            // release; 'W' (nothing done): someone did, so the release that
            // reads the line follows.
            // The holder's record from its second byte: "0<token> <n>\n<owner> ".
            std::string held = "0";
            detail::append_token_digits(held, token);
            append_holder(held, owner);
            pool::call c(ctx_.calls());
            auto r = c.eval(scripts::lease_release, {lease_key(name)}, with_now({std::move(held)}), true);
            if (!r) return unexpected(lease_error{r.error(), {}, 0, {}});
            if (detail::text(r->get()) == "OK") return {};
            if (detail::text(r->get()) != "W") {
                auto o = outcome(name, owner, r->get());
                if (!o) return unexpected(std::move(o.error()));
                return {};
            }
        }
        auto r = call(scripts::lease_release_line, name, owner, {lease_key(name), line_key(name), ends_key(name)},
                      {ctx_.now(), std::string(owner), std::to_string(token), channel_prefix(name)});
        if (!r) return unexpected(r.error());
        return {};
    }
    result<std::optional<lease>> lease_read(std::string_view name) {
        pool::call c(ctx_.calls());
        auto r = c.eval(scripts::lease_read, {lease_key(name)}, {ctx_.now()}, false);
        if (!r) return unexpected(r.error());
        if (detail::text(r->get()) == "NONE") return std::optional<lease>{};
        auto a = parse(name, detail::text(r->get()), {});
        if (!a) return unexpected(a.error().code);
        if (a->code != "OK") return unexpected(detail::bad_reply("lease read"));
        return std::optional<lease>{std::move(a->l)};
    }

    result<std::uint64_t> lease_enqueue(std::string_view name, std::string_view who, std::chrono::nanoseconds place_ttl) {
        pool::call c(ctx_.calls());
        auto r = c.eval(scripts::lease_enqueue, {line_key(name), ends_key(name), tickets_key(name), lease_key(name)},
                        {ctx_.now(), std::string(who), detail::ns_arg(place_ttl.count())}, true);
        if (!r) return unexpected(r.error());
        if (detail::element(r->get(), 0) == "B") return unexpected(not_a_record(name));
        const auto t = detail::u64_of(detail::element(r->get(), 1));
        if (!t) return unexpected(detail::bad_reply("lease enqueue"));
        return *t;
    }
    result<lease, lease_error> lease_acquire_queued(std::string_view name, std::string_view owner, std::chrono::nanoseconds ttl,
                                                    std::uint64_t ticket, std::chrono::nanoseconds place_ttl) {
        return call(scripts::lease_acquire_queued, name, owner, {lease_key(name), line_key(name), ends_key(name)},
                    {ctx_.now(), std::string(owner), detail::ns_arg(ttl.count()), std::to_string(ticket),
                     detail::ns_arg(place_ttl.count())});
    }
    result<void> lease_dequeue(std::string_view name, std::uint64_t ticket) {
        pool::call c(ctx_.calls());
        auto r = c.eval(scripts::lease_dequeue, {line_key(name), ends_key(name)},
                        {ctx_.now(), std::to_string(ticket), channel_prefix(name)}, true);
        if (!r) return unexpected(r.error());
        return {};
    }
    result<std::vector<lease_waiter>> lease_queue_read(std::string_view name) {
        pool::call c(ctx_.calls());
        auto r = c.eval(scripts::lease_queue_read, {line_key(name), ends_key(name)}, {ctx_.now()}, false);
        if (!r) return unexpected(r.error());
        const std::size_t n = detail::elements(r->get());
        if (n == 0 || (n - 1) % 3 != 0) return unexpected(detail::bad_reply("lease queue read"));
        std::vector<lease_waiter> out;
        for (std::size_t i = 1; i + 2 < n; i += 3) {
            const auto t = detail::u64_of(detail::element(r->get(), i));
            const auto until = detail::i64_of(detail::element(r->get(), i + 2));
            if (!t || !until) return unexpected(detail::bad_reply("lease queue read"));
            out.push_back(lease_waiter{*t, std::string(detail::element(r->get(), i + 1)), std::chrono::nanoseconds{*until}});
        }
        return out;
    }
    /// A waiter's turn: its place's channel stays SUBSCRIBEd from the first
    /// wait to the end of this object, so a wake published between two
    /// waits is read by the next one. After the SUBSCRIBE, the waiter asks
    /// once whether it may go now (a release published before it).
    class waiting {
    public:
        waiting(lease_adapter& a, std::string_view name, std::uint64_t ticket)
            : a_(a), name_(name), ticket_(ticket), channel_(a.channel_prefix(name) + std::to_string(ticket)) {}
        waiting(const waiting&) = delete;
        waiting& operator=(const waiting&) = delete;
        ~waiting() {
            if (listener_) (void)listener_->unsubscribe();
        }

        void wait(std::size_t ahead, std::chrono::steady_clock::time_point until) {
            if (!listener_) {
                listener_.emplace(a_.ctx_.listeners());
                if (!listener_->subscribe(channel_)) return coord::detail::lease_wait_unlistened(listener_, ahead, until);
                if (a_.next_in_line(name_, ticket_)) return;
            }
            if (!listener_->wait_message(until)) coord::detail::lease_wait_unlistened(listener_, ahead, until);
        }

    private:
        lease_adapter& a_;
        std::string name_;
        std::uint64_t ticket_;
        std::string channel_;
        std::optional<pool::call> listener_;
    };
    waiting lease_waiting(std::string_view name, std::uint64_t ticket) { return waiting(*this, name, ticket); }

    /// lease_watch_store: SUBSCRIBEd to the channel named as the lease's key
    /// (a connection of the listener pool, from the first wait to the end of
    /// this object), and the record's w set (lease_observe), so that grants
    /// and releases take the paths that PUBLISH there; a release that finds
    /// no subscriber left clears w again. A term that ends unrenewed writes
    /// nothing: it is seen by the next read.
    class watching {
    public:
        watching(lease_adapter& a, std::string_view name) : a_(a), channel_(a.lease_key(name)) {}
        watching(const watching&) = delete;
        watching& operator=(const watching&) = delete;
        ~watching() {
            if (listener_) (void)listener_->unsubscribe();
        }
        /// True: read the lease again (just subscribed, or a grant or a
        /// release was published); false: `until` came first.
        bool wait(std::chrono::steady_clock::time_point until) {
            if (!listener_) {
                listener_.emplace(a_.ctx_.listeners());
                if (!listener_->subscribe(channel_) || !observe()) return coord::detail::lease_watch_unlistened(listener_, until);
                return true;
            }
            auto m = listener_->wait_message(until);
            if (!m) return coord::detail::lease_watch_unlistened(listener_, until);
            return *m;
        }

    private:
        bool observe() {
            pool::call c(a_.ctx_.calls());
            auto r = c.eval(scripts::lease_observe, {channel_}, {}, true);
            return r && detail::text(r->get()) == "OK";
        }
        lease_adapter& a_;
        std::string channel_;
        std::optional<pool::call> listener_;
    };
    watching lease_watching(std::string_view name) { return watching(*this, name); }

private:
    // The holder as the lease record keeps it (scripts.hpp): " <n>\n<holder> ",
    // its length first, so that any bytes may be in it.
    static void append_holder(std::string& out, std::string_view holder) {
        out += ' ';
        out += std::to_string(holder.size());
        out += '\n';
        out += holder;
        out += ' ';
    }
    std::string lease_key(std::string_view name) const { return ctx_.key().of("lease", name); }
    // The line (scripts.hpp, COORD_REDIS_LUA_LINE). Keys of their own, apart
    // from the single-hash layout before 2026-12: during a rolling upgrade,
    // old and new waiters wait in two lines (one lease record: never two
    // holders), rather than each purging the other's places.
    std::string line_key(std::string_view name) const { return ctx_.key().of("wait-line", name); }
    std::string ends_key(std::string_view name) const { return ctx_.key().of("wait-ends", name); }
    std::string tickets_key(std::string_view name) const { return ctx_.key().of("wait-tickets", name); }
    // True when the ticket is first in line and nobody holds the lease (or
    // the store cannot say: the waiter then asks with a queued acquire).
    bool next_in_line(std::string_view name, std::uint64_t ticket) {
        pool::call c(ctx_.calls());
        auto r = c.eval(scripts::lease_next_in_line, {lease_key(name), line_key(name), ends_key(name)},
                        {ctx_.now(), std::to_string(ticket)}, false);
        return !r || detail::element(r->get(), 0) == "1";
    }
    std::string channel_prefix(std::string_view name) const {
        std::string c = ctx_.key().of("lw", name);
        c += ':';
        return c;
    }

    coord::error not_a_record(std::string_view name) const {
        return coord::error(coord::make_error_code(coord::errc::state_corrupt),
                            "the key " + lease_key(name) + " holds no lease record of coord's (another program, or an "
                            "older coord's layout); nothing was changed");
    }

    // A lease script's answer: "CODE token ttl start now ahead\nholder" (the
    // holder's term, or zeros when nobody holds the name; the holder empty on
    // a grant: the owner asked for), "OK" for a release, 'B' for a key that
    // holds no lease record.
    struct answer {
        std::string_view code;
        lease l;
        std::int64_t now = 0;
        std::size_t ahead = 0;
    };
    result<answer, lease_error> parse(std::string_view name, std::string_view text, std::string_view owner) const {
        if (text == "B") return unexpected(lease_error{not_a_record(name), {}, 0, {}});
        const auto bad = [] { return unexpected(lease_error{detail::bad_reply("a lease script"), {}, 0, {}}); };
        const auto nl = text.find('\n');
        if (nl == std::string_view::npos) return bad();
        std::string_view head = text.substr(0, nl);
        std::string_view field[6];
        for (auto& f : field) {
            const auto sp = head.find(' ');
            f = head.substr(0, sp);
            head = sp == std::string_view::npos ? std::string_view{} : head.substr(sp + 1);
        }
        const auto token = detail::u64_of(field[1]);
        const auto ttl = detail::i64_of(field[2]);
        const auto start = detail::i64_of(field[3]);
        const auto now = detail::i64_of(field[4]);
        const auto ahead = detail::u64_of(field[5]);
        if (!head.empty() || !token || !ttl || !start || !now || !ahead) return bad();
        std::string_view holder = text.substr(nl + 1);
        if (holder.empty() && field[0] == "OK") holder = owner;
        // The term ends at start + ttl, saturated, as the script judges it (0: nobody holds the name).
        const std::int64_t exp = *start == 0 && *ttl == 0 ? 0 : coord::detail::add_saturated(*start, *ttl);
        return answer{field[0],
                      lease{std::string(name), std::string(holder), *token, std::chrono::nanoseconds{*ttl},
                            std::chrono::nanoseconds{exp}},
                      *now, static_cast<std::size_t>(*ahead)};
    }

    // The arguments, then the test clock's reading when there is one (the
    // server's TIME otherwise: the scripts read it when it is missing).
    std::vector<std::string> with_now(std::vector<std::string> args) const {
        std::string now = ctx_.now();
        if (!now.empty()) args.push_back(std::move(now));
        return args;
    }
    // A grant, renewal or release; refusals: H held, N not the holder, X
    // expired, L the waiter's place lapsed.
    result<lease, lease_error> call(const detail::script& s, std::string_view name, std::string_view owner,
                                    std::vector<std::string> keys, std::vector<std::string> args) {
        pool::call c(ctx_.calls());
        auto r = c.eval(s, keys, args, true);
        if (!r) return unexpected(lease_error{r.error(), {}, 0, {}});
        return outcome(name, owner, r->get());
    }
    result<lease, lease_error> outcome(std::string_view name, std::string_view owner, const redisReply* r) const {
        if (detail::text(r) == "OK") return lease{};  // a release
        auto a = parse(name, detail::text(r), owner);
        if (!a) return unexpected(std::move(a.error()));
        if (a->code == "OK") return std::move(a->l);
        const coord::errc code = a->code == "H"   ? coord::errc::lease_held
                                 : a->code == "X" ? coord::errc::lease_expired
                                 : a->code == "L" ? coord::errc::wait_place_lost
                                 : a->code == "N" ? coord::errc::not_lease_holder
                                                  : coord::errc{};
        if (code == coord::errc{}) return unexpected(lease_error{detail::bad_reply("a lease script"), {}, 0, {}});
        lease_error e{coord::make_error_code(code), a->l.owner, a->l.token, a->l.expires_at};
        e.ahead = a->ahead;
        e.now = std::chrono::nanoseconds{a->now};
        return unexpected(std::move(e));
    }

    detail::context<Clock>& ctx_;
};

}  // namespace coord::redis
