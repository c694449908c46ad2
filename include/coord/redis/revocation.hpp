// SPDX-License-Identifier: Apache-2.0
// coord/redis/revocation.hpp: revocation_store on Redis (the JWT deny list
// and per-subject not-before times).
//
// Round trips: every operation 1, one script that checks the store's
// identity first: a store that lost its deny list refuses
// (errc::store_uninitialized) rather than let revoked tokens validate again.
// A denial keeps the later time and expires a day after it (the token cannot
// validate past its exp anyway); a subject's not-before never moves back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "coord/redis/context.hpp"
#include "coord/redis/scripts.hpp"
#include "coord/session.hpp"

namespace coord::redis {

template <class Clock>
class revocation_adapter {
public:
    explicit revocation_adapter(detail::context<Clock>& ctx) noexcept : ctx_(ctx) {}

    result<void> revoke_token(std::string_view jti, std::int64_t until_s) {
        return write(scripts::revoke_token, ctx_.key().of("denied", jti), until_s);
    }
    result<void> revoke_subject(std::string_view sub, std::int64_t not_before_s) {
        return write(scripts::revoke_subject, ctx_.key().of("not-before", sub), not_before_s);
    }
    result<bool> token_revoked(std::string_view jti, std::string_view sub, std::optional<std::int64_t> iat,
                               std::int64_t now_s) {
        pool::call c(ctx_.calls());
        auto r = ctx_.checked(c, scripts::token_revoked, {ctx_.key().of("denied", jti), ctx_.key().of("not-before", sub)},
                              {jti.empty() ? "0" : "1", sub.empty() ? "0" : "1", iat ? std::to_string(*iat) : std::string(),
                               std::to_string(now_s)},
                              false);
        if (!r) return unexpected(r.error());
        const auto v = detail::element(r->get(), 1);
        if (v != "0" && v != "1") return unexpected(detail::bad_reply("token_revoked"));
        return v == "1";
    }

private:
    result<void> write(const detail::script& s, std::string key, std::int64_t t) {
        pool::call c(ctx_.calls());
        auto r = ctx_.checked(c, s, {std::move(key)}, {std::to_string(t)}, true);
        if (!r) return unexpected(r.error());
        return {};
    }

    detail::context<Clock>& ctx_;
};

}  // namespace coord::redis
