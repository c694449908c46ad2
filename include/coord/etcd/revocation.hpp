// SPDX-License-Identifier: Apache-2.0
// coord/etcd/revocation.hpp: revocation_store on etcd (the JWT deny list and
// per-subject not-before times).
//
// token_revoked reads the store's identity with its keys and every write
// compares it: a store whose keys were deleted (a denial gone) refuses
// instead of answering "not revoked".
// PREFIX/denied/JTI holds the latest exp a denial was given and
// PREFIX/not-before/SUB the subject's not-before (decimal seconds). A write
// reads the key and its mod revision and writes the larger time in a
// transaction that compares the mod revision: 2 round trips, again on a
// conflict (up to 64 times). token_revoked is one transaction reading both.
#pragma once

#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "coord/detail/backoff.hpp"
#include "coord/etcd/context.hpp"
#include "coord/rules/revocation.hpp"
#include "coord/session.hpp"

namespace coord::etcd {

template <class Clock>
class revocation_adapter {
public:
    explicit revocation_adapter(detail::context<Clock>& ctx) noexcept : ctx_(ctx) {}

    result<void> revoke_token(std::string_view jti, std::int64_t until_s) { return raise(ctx_.key().of("denied", jti), until_s); }
    result<void> revoke_subject(std::string_view sub, std::int64_t not_before_s) {
        return raise(ctx_.key().of("not-before", sub), not_before_s);
    }
    result<bool> token_revoked(std::string_view jti, std::string_view sub, std::optional<std::int64_t> iat, std::int64_t now_s) {
        if (auto id = ctx_.identity(); !id) return unexpected(id.error());
        auto r = ctx_.txn({}, {detail::get(ctx_.key().of("denied", jti)), detail::get(ctx_.key().of("not-before", sub)),
                               detail::get(ctx_.key().identity())},
                          {}, false);
        if (!r) return unexpected(r.error());
        if (r->ranges.size() != 3) return unexpected(detail::bad("token_revoked: three ranges expected"));
        if (auto bad = ctx_.identity_problem(r->ranges[2])) return unexpected(*bad);
        if (!jti.empty() && r->ranges[0]) {
            auto until = number_of(r->ranges[0]->value);
            if (!until) return unexpected(detail::bad("a denial is not a number"));
            if (coord::detail::revocation_rule::denied(*until, now_s)) return true;
        }
        if (!sub.empty() && r->ranges[1]) {
            auto nb = number_of(r->ranges[1]->value);
            if (!nb) return unexpected(detail::bad("a not-before is not a number"));
            if (coord::detail::revocation_rule::before_not_before(iat, *nb)) return true;
        }
        return false;
    }

private:
    static std::optional<std::int64_t> number_of(std::string_view s) {
        std::int64_t v = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (s.empty() || ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
        return v;
    }

    // Keeps the later time (the rule never moves a denial or a not-before back).
    result<void> raise(const std::string& key, std::int64_t t) {
        using R = result<void>;
        auto decided = coord::detail::retry_conflicts(coord::detail::conflict_tries, [&](int) -> std::optional<R> {
            auto id = ctx_.identity();
            if (!id) return R(unexpected(id.error()));
            auto r = ctx_.txn({}, {detail::get(key)}, {}, false);
            if (!r) return R(unexpected(r.error()));
            if (r->ranges.size() != 1) return R(unexpected(detail::bad("revocation: one range expected")));
            std::int64_t mod = 0, current = std::numeric_limits<std::int64_t>::min();
            if (r->ranges[0]) {
                auto v = number_of(r->ranges[0]->value);
                if (!v) return R(unexpected(detail::bad("a revocation time is not a number")));
                current = *v;
                mod = r->ranges[0]->mod_revision;
            }
            if (mod != 0 && current >= t) return R();  // kept data: already as late
            auto w = ctx_.txn({detail::mod_is(key, mod), ctx_.identity_is(ctx_.key(), *id)}, {detail::put(key, std::to_string(t))},
                              {}, true);
            if (!w) return R(unexpected(w.error()));
            if (w->succeeded) return R();
            if (auto bad = ctx_.identity_changed()) return R(unexpected(*bad));
            return std::nullopt;
        });
        if (decided) return *decided;
        return unexpected(detail::contention("revocation"));
    }

    detail::context<Clock>& ctx_;
};

}  // namespace coord::etcd
