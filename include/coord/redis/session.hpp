// SPDX-License-Identifier: Apache-2.0
// coord/redis/session.hpp: session_store on Redis (server-side sessions keyed
// by the hash of their ID), where services keep their sessions.
//
// Round trips: every operation 1, one script. A session is a hash; its idle
// and absolute timeouts are judged in the script on the server's TIME, and
// the key expires (PEXPIRE) a minute after the rule says it ended, so Redis
// itself collects sessions nobody loads again. A user's sessions are listed
// in a set, so revoke_user ends all of them in one step. Sessions do not need
// the store's identity: a session Redis lost is a signed-out user.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "coord/redis/context.hpp"
#include "coord/redis/scripts.hpp"
#include "coord/session.hpp"

namespace coord::redis {

template <class Clock>
class session_adapter {
public:
    explicit session_adapter(detail::context<Clock>& ctx) noexcept : ctx_(ctx) {}

    result<session_record> session_create(std::string_view hash, const session_request& req) {
        pool::call c(ctx_.calls());
        auto r = c.eval(scripts::session_create, {session_key(hash), user_key(req.user)},
                        {ctx_.now(), std::string(req.user), std::string(req.data), non_negative(req.idle_timeout_ms),
                         non_negative(req.absolute_timeout_ms)},
                        true);
        if (!r) return unexpected(r.error());
        if (auto e = status(r->get())) return unexpected(e);
        const auto created = detail::i64_of(detail::element(r->get(), 1));
        const auto expiry = detail::i64_of(detail::element(r->get(), 2));
        if (!created || !expiry) return unexpected(detail::bad_reply("session create"));
        session_record rec;
        rec.user.assign(req.user);
        rec.data.assign(req.data);
        rec.created_ms = rec.last_seen_ms = *created;
        rec.absolute_expiry_ms = *expiry;
        rec.idle_timeout_ms = req.idle_timeout_ms < 0 ? 0 : req.idle_timeout_ms;
        rec.version = 1;
        return rec;
    }
    result<session_record> session_load(std::string_view hash) {
        pool::call c(ctx_.calls());
        auto r = c.eval(scripts::session_load, {session_key(hash)}, {ctx_.now(), ctx_.key().tag()}, true);
        if (!r) return unexpected(r.error());
        if (auto e = status(r->get())) return unexpected(e);
        const redisReply* a = r->get();
        const auto created = detail::i64_of(detail::element(a, 3));
        const auto seen = detail::i64_of(detail::element(a, 4));
        const auto expiry = detail::i64_of(detail::element(a, 5));
        const auto idle = detail::i64_of(detail::element(a, 6));
        const auto version = detail::u64_of(detail::element(a, 7));
        if (detail::elements(a) != 8 || !created || !seen || !expiry || !idle || !version)
            return unexpected(detail::bad_reply("session load"));
        session_record rec;
        rec.user = std::string(detail::element(a, 1));
        rec.data = std::string(detail::element(a, 2));
        rec.created_ms = *created;
        rec.last_seen_ms = *seen;
        rec.absolute_expiry_ms = *expiry;
        rec.idle_timeout_ms = *idle;
        rec.version = *version;
        return rec;
    }
    result<std::uint64_t> session_save(std::string_view hash, std::uint64_t version, std::string_view data) {
        return versioned(scripts::session_save, {session_key(hash)},
                         {ctx_.now(), ctx_.key().tag(), std::to_string(version), std::string(data)});
    }
    result<std::uint64_t> session_rotate(std::string_view old_hash, std::string_view new_hash, std::uint64_t version) {
        return versioned(scripts::session_rotate, {session_key(old_hash), session_key(new_hash)},
                         {ctx_.now(), ctx_.key().tag(), std::to_string(version)});
    }
    result<bool> session_revoke(std::string_view hash) {
        pool::call c(ctx_.calls());
        auto r = c.eval(scripts::session_revoke, {session_key(hash)}, {ctx_.key().tag()}, true);
        if (!r) return unexpected(r.error());
        return detail::element(r->get(), 0) == "1";
    }
    result<std::size_t> session_revoke_user(std::string_view user) {
        pool::call c(ctx_.calls());
        auto r = c.eval(scripts::session_revoke_user, {user_key(user)}, {}, true);
        if (!r) return unexpected(r.error());
        const auto n = detail::u64_of(detail::element(r->get(), 1));
        if (!n) return unexpected(detail::bad_reply("session revoke_user"));
        return static_cast<std::size_t>(*n);
    }

private:
    // The scripts build a user's set name from the tag: "{prefix}:su:<user>".
    std::string session_key(std::string_view hash) const { return ctx_.key().of("ss", hash); }
    std::string user_key(std::string_view user) const { return ctx_.key().of("su", user); }
    static std::string non_negative(std::int64_t v) { return std::to_string(v < 0 ? 0 : v); }

    static std::error_code status(const redisReply* r) {
        const auto s = detail::element(r, 0);
        if (s == "1") return coord::make_error_code(coord::errc::session_not_found);
        if (s == "2") return coord::make_error_code(coord::errc::session_expired);
        if (s == "3") return coord::make_error_code(coord::errc::session_conflict);
        if (s != "0") return make_error_code(errc::bad_answer);
        return {};
    }

    result<std::uint64_t> versioned(const detail::script& s, std::vector<std::string> keys, std::vector<std::string> args) {
        pool::call c(ctx_.calls());
        auto r = c.eval(s, keys, args, true);
        if (!r) return unexpected(r.error());
        if (auto e = status(r->get())) return unexpected(e);
        const auto v = detail::u64_of(detail::element(r->get(), 1));
        if (!v) return unexpected(detail::bad_reply("session save"));
        return *v;
    }

    detail::context<Clock>& ctx_;
};

}  // namespace coord::redis
