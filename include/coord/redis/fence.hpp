// SPDX-License-Identifier: Apache-2.0
// coord/redis/fence.hpp: fence_store and fence_update_store on Redis.
//
// Round trips: fence_write 1 (one script: the rule of coord/rules/fence.hpp
// on the key's record, tokens kept as 20 decimal digits so that every 64-bit
// token is exact and two comparisons decide the common case), 2 when the
// record is missing or was written under another identity (the first script
// changes nothing and says so; the second applies the rule with the identity
// key, whose check needs it declared: the common path declares the fence's
// key only); fence_read 1.
// fence_update 2 (read the value and its version, a SHA-1 of the record; fn;
// a compare-and-set script that writes only when the version is unchanged and
// the token passes); when another writer got in between, read and fn again
// (fn may run more than once, as the concept allows).
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "coord/fence.hpp"
#include "coord/redis/context.hpp"
#include "coord/redis/scripts.hpp"

namespace coord::redis {

template <class Clock>
class fence_adapter {
public:
    explicit fence_adapter(detail::context<Clock>& ctx) noexcept : ctx_(ctx) {}

    /// Refusals: stale_fence, stale_sequence (with the highest token);
    /// errc::outcome_unknown when no reply came after sending.
    result<void, write_error> fence_write(std::string_view key, fence_token token, std::string_view value) {
        return write(key, token, std::nullopt, value);
    }
    result<void, write_error> fence_write(std::string_view key, fence_token token, std::uint64_t seq,
                                          std::string_view value) {
        return write(key, token, seq, value);
    }

    /// fn runs only when the token passes, possibly more than once (another
    /// writer between the read and the write: read and run it again). If it
    /// throws, nothing is written and the exception propagates.
    template <class F>
    result<void, write_error> fence_update(std::string_view key, fence_token token, F&& fn) {
        const std::string k = ctx_.key().of("fence", key);
        const std::string t = detail::token_digits(token);
        for (;;) {
            pool::call c(ctx_.calls());
            auto r = ctx_.checked(c, scripts::fence_read, {k}, {"1"}, false);
            if (!r) return unexpected(write_error{r.error(), 0});
            const auto highest = detail::u64_of(detail::element(r->get(), 1));
            if (detail::elements(r->get()) != 5 || !highest) return unexpected(write_error{detail::bad_reply("fence read"), 0});
            const bool written = detail::element(r->get(), 2) == "1";
            // A missing record reads as its floor when the store was
            // initialized with one (scripts.hpp, "Floors").
            if (token < *highest)
                return unexpected(write_error{coord::make_error_code(coord::errc::stale_fence), *highest});
            (void)written;
            std::string value(detail::element(r->get(), 3));
            const std::string version(detail::element(r->get(), 4));
            fn(value);
            c.restart_deadline();
            auto w = ctx_.checked(c, scripts::fence_cas, {k}, {t, version, std::move(value)}, true);
            if (!w) return unexpected(write_error{w.error(), 0});
            if (detail::text(w->get()) == "R") continue;
            return answer(w->get());
        }
    }

    result<fenced_value> fence_read(std::string_view key) {
        pool::call c(ctx_.calls());
        auto r = ctx_.checked(c, scripts::fence_read, {ctx_.key().of("fence", key)}, {"0"}, false);
        if (!r) return unexpected(r.error());
        const auto highest = detail::u64_of(detail::element(r->get(), 1));
        if (detail::elements(r->get()) != 5 || !highest) return unexpected(detail::bad_reply("fence read"));
        return fenced_value{*highest, std::string(detail::element(r->get(), 3)), detail::element(r->get(), 2) == "1"};
    }

private:
    result<void, write_error> write(std::string_view key, fence_token token, std::optional<std::uint64_t> seq,
                                    std::string_view value) {
        pool::call c(ctx_.calls());
        // The record the write leaves when the rule lets it (the scripts' one
        // argument): "<identity><token: 20 digits> <seq>\n<value>".
        const auto record = [&](const std::string& id) {
            std::string rec;
            rec.reserve(id.size() + value.size() + 44);
            rec += id;
            detail::append_token_digits(rec, token);
            rec += ' ';
            if (seq) rec += std::to_string(*seq);
            rec += '\n';
            rec += value;
            return rec;
        };
        auto id = ctx_.known_identity(c);
        if (!id) return unexpected(write_error{id.error(), 0});
        const std::string k = ctx_.key().of("fence", key);
        auto r = ctx_.guarded(c, scripts::fence_write, {k}, {record(*id)}, true);
        // 'M': the record is missing or another identity's; nothing was
        // done, and the write with the identity check follows.
        if (r && detail::text(r->get()) == "M") r = ctx_.checked(c, scripts::fence_write_checked, {k}, {}, true, false, record);
        if (!r) return unexpected(write_error{r.error(), 0});
        return answer(r->get());
    }

    // 'OK', or 'S<highest>' / 'Q<highest>': the refusal with the highest token.
    static result<void, write_error> answer(const redisReply* r) {
        const auto status = detail::text(r);
        if (status == "OK") return {};
        const auto highest = detail::u64_of(status.substr(std::min<std::size_t>(1, status.size())));
        if (status.empty() || (status[0] != 'S' && status[0] != 'Q') || !highest)
            return unexpected(write_error{detail::bad_reply("fence write"), 0});
        return unexpected(write_error{
            coord::make_error_code(status[0] == 'S' ? coord::errc::stale_fence : coord::errc::stale_sequence), *highest});
    }

    detail::context<Clock>& ctx_;
};

}  // namespace coord::redis
