// SPDX-License-Identifier: Apache-2.0
// coord/jwt/claims.hpp: a validated token's header and claims, read strictly from its JSON (no OpenSSL).
// Part of coord/jwt.hpp (the umbrella); see its banner for the promises.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "coord/detail/base64url.hpp"
#include "coord/detail/config.hpp"
#include "coord/detail/json.hpp"
#include "coord/error.hpp"
#include "coord/jwt/algorithm.hpp"
#include "coord/result.hpp"

namespace coord::jwt {

/// The protected header of a verified token.
struct header {
    algorithm alg = algorithm::hs256;  ///< the "alg" the token was signed with
    std::optional<std::string> kid;  ///< the "kid", when present
    std::optional<std::string> typ;  ///< the "typ", when present
    std::optional<std::string> cty;  ///< the "cty", when present
};

/// A JWS whose signature verified: its header and decoded payload bytes.
struct verified_jws {
    header hdr;  ///< the protected header
    std::string payload;  ///< the payload's bytes, base64url-decoded
};

namespace detail {
struct claims_access;

/// A token payload's bytes: inline up to a typical claims set's size (no
/// allocation per token), on the heap past it. Copyable and movable.
class payload_text {
public:
    static constexpr std::size_t inline_capacity = 384;

    payload_text() noexcept {}
    payload_text(const payload_text& o) { assign(o.view()); }
    payload_text& operator=(const payload_text& o) {
        if (this != &o) assign(o.view());
        return *this;
    }
    payload_text(payload_text&& o) noexcept { take(o); }
    payload_text& operator=(payload_text&& o) noexcept {
        if (this != &o) take(o);
        return *this;
    }

    /// Room for exactly n bytes (the old bytes are gone), to be written.
    char* prepare(std::size_t n) {
        if (n > inline_capacity) heap_ = std::make_unique_for_overwrite<char[]>(n);
        else heap_.reset();
        size_ = n;
        return data();
    }
    std::string_view view() const noexcept { return {heap_ ? heap_.get() : inline_, size_}; }

private:
    std::unique_ptr<char[]> heap_;
    std::size_t size_ = 0;
    char inline_[inline_capacity];

    char* data() noexcept { return heap_ ? heap_.get() : inline_; }
    void assign(std::string_view t) {
        char* to = prepare(t.size());
        if (!t.empty()) std::memcpy(to, t.data(), t.size());
    }
    void take(payload_text& o) noexcept {
        if (o.heap_) {
            heap_ = std::move(o.heap_);
            size_ = o.size_;
        } else {
            heap_.reset();
            size_ = o.size_;
            if (size_ != 0) std::memcpy(inline_, o.inline_, size_);
        }
        o.size_ = 0;
    }
};

/// Where verify_into() decodes a payload: room for exactly n bytes.
inline char* prepare_payload(std::string& s, std::size_t n) {
    s.resize(n);
    return s.data();
}
inline char* prepare_payload(payload_text& p, std::size_t n) { return p.prepare(n); }
}  // namespace detail

/// The claims of a validated JWT. json() is the payload, one JSON object with
/// no duplicate names. The registered claims are read out once and served
/// from the payload's text without copies (an escaped string is unescaped
/// once, aside). Copyable and movable; views stay valid while it lives.
class claims {
public:
    /// The token's protected header.
    const header& hdr() const noexcept { return hdr_; }
    /// The payload's JSON text.
    std::string_view json() const noexcept { return json_.view(); }
    /// The "iss" claim, when present.
    std::optional<std::string_view> iss() const noexcept { return text(iss_); }
    /// The "sub" claim, when present.
    std::optional<std::string_view> sub() const noexcept { return text(sub_); }
    /// The "jti" claim, when present.
    std::optional<std::string_view> jti() const noexcept { return text(jti_); }
    /// The "exp" claim (Unix seconds), when present.
    std::optional<std::int64_t> exp() const noexcept { return exp_; }
    /// The "nbf" claim (Unix seconds), when present.
    std::optional<std::int64_t> nbf() const noexcept { return nbf_; }
    /// The "iat" claim (Unix seconds), when present.
    std::optional<std::int64_t> iat() const noexcept { return iat_; }
    /// True when the payload has an aud member.
    bool has_aud() const noexcept { return aud_.present; }
    /// True when aud is `audience`, or is an array holding it (exact match).
    bool has_audience(std::string_view audience) const;
    /// aud's values, unescaped (empty when there is no aud).
    std::vector<std::string> audiences() const;

    /// A top-level string claim, unescaped; none when absent or not a string.
    std::optional<std::string> string_claim(std::string_view claim) const;
    /// A top-level integer claim; none when absent or not an int64 integer.
    std::optional<std::int64_t> integer_claim(std::string_view claim) const;
    /// True when the payload has a top-level member `claim`.
    bool has(std::string_view claim) const;

private:
    friend struct detail::claims_access;
    // Where a claim's text is: in json_ (as written) or in decoded_ (unescaped).
    struct text_ref {
        std::uint32_t offset = 0, size = 0;
        bool present = false, decoded = false;
    };
    header hdr_;
    detail::payload_text json_;
    std::string decoded_;
    text_ref iss_, sub_, jti_, aud_;  // aud_: the raw JSON value
    std::optional<std::int64_t> exp_, nbf_, iat_;

    std::optional<std::string_view> text(const text_ref& r) const noexcept {
        if (!r.present) return std::nullopt;
        return (r.decoded ? std::string_view(decoded_) : json_.view()).substr(r.offset, r.size);
    }
};


/// The latest NumericDate accepted: 9999-12-31T23:59:59Z.
inline constexpr std::int64_t max_numeric_date = 253402300799;


namespace detail {

namespace json = coord::detail::json;
using coord::detail::base64url_append;
using coord::detail::base64url_decode;
using coord::detail::base64url_decoded_size;

/// Reads the payload into a claims object: validates the JSON and reads the
/// registered claims (types and ranges checked).
struct claims_access {
    /// The parts validate() decodes into.
    static header& hdr(claims& c) noexcept { return c.hdr_; }
    static payload_text& payload(claims& c) noexcept { return c.json_; }

    /// Reads c's payload (already in place, see payload()).
    static errc read(claims& c, std::size_t max_depth) {
        const std::string_view text = c.json_.view();
        json::reader r(text, max_depth);
        errc bad{};
        auto locate = [&](const json::value& v, claims::text_ref& ref) {
            ref.present = true;
            if (!v.escaped) {
                ref.offset = static_cast<std::uint32_t>(v.body().data() - text.data());
                ref.size = static_cast<std::uint32_t>(v.body().size());
                return;
            }
            ref.decoded = true;
            ref.offset = static_cast<std::uint32_t>(c.decoded_.size());
            const std::string u = json::unescape(v);
            ref.size = static_cast<std::uint32_t>(u.size());
            c.decoded_ += u;
        };
        const bool ok = r.read_object([&](const json::value& k, const json::value& v) COORD_ALWAYS_INLINE_LAMBDA {
            // Every registered claim name has three letters: most members end here.
            if (!k.escaped && k.body().size() != 3) return true;
            const std::string unescaped = k.escaped ? json::unescape(k) : std::string();
            const std::uint32_t code = json::code3(k.escaped ? std::string_view(unescaped) : k.body());
            auto date = [&](std::optional<std::int64_t>& slot) {
                if (v.type != json::kind::integer || v.integer < 0 || v.integer > max_numeric_date) {
                    bad = errc::token_bad_claim;
                    return false;
                }
                slot = v.integer;
                return true;
            };
            auto text_claim = [&](claims::text_ref& slot) {
                if (v.type != json::kind::string) {
                    bad = errc::token_bad_claim;
                    return false;
                }
                locate(v, slot);
                return true;
            };
            switch (code) {
            case json::code3("exp"): return date(c.exp_);
            case json::code3("nbf"): return date(c.nbf_);
            case json::code3("iat"): return date(c.iat_);
            case json::code3("iss"): return text_claim(c.iss_);
            case json::code3("sub"): return text_claim(c.sub_);
            case json::code3("jti"): return text_claim(c.jti_);
            case json::code3("aud"): break;
            default: return true;
            }
            // aud: a string, or a non-empty array of strings.
            bool well_formed = v.type == json::kind::string;
            if (v.type == json::kind::array) {
                bool all_strings = true, any = false;
                json::for_each_element(v, [&](const json::value& e) {
                    any = true;
                    all_strings = all_strings && e.type == json::kind::string;
                });
                well_formed = any && all_strings;
            }
            if (!well_formed) {
                bad = errc::token_bad_claim;
                return false;
            }
            c.aud_ = {static_cast<std::uint32_t>(v.raw.data() - text.data()), static_cast<std::uint32_t>(v.raw.size()), true,
                      false};
            return true;
        });
        if (bad != errc{}) return bad;
        if (!ok) return errc::token_bad_json;
        return {};
    }

    /// Calls fn(value) for each string of aud.
    template <class Fn>
    static void for_each_audience(const claims& c, Fn&& fn) {
        if (!c.aud_.present) return;
        json::value v;
        json::reader r(c.json_.view().substr(c.aud_.offset, c.aud_.size), 2);
        if (!r.read_value(v)) return;
        if (v.type == json::kind::string) fn(v);
        else json::for_each_element(v, fn);
    }
};

/// Finds a top-level member of a validated object; calls fn(value) if found.
template <class Fn>
bool find_member(std::string_view json_text, std::string_view member, Fn&& fn) {
    json::reader r(json_text, 64);
    bool found = false;
    (void)r.read_object([&](const json::value& k, const json::value& v) {
        if (json::equals(k, member)) {
            found = true;
            fn(v);
            return false;
        }
        return true;
    });
    return found;
}

}  // namespace detail

// --- claims ---------------------------------------------------------------

inline bool claims::has_audience(std::string_view audience) const {
    if (!aud_.present) return false;
    // The common form, one string without escapes, compared where it lies.
    const std::string_view raw = json_.view().substr(aud_.offset, aud_.size);
    if (raw.front() == '"' && raw.find('\\') == std::string_view::npos) return raw.substr(1, raw.size() - 2) == audience;
    bool found = false;
    detail::claims_access::for_each_audience(*this, [&](const detail::json::value& v) {
        found = found || detail::json::equals(v, audience);
    });
    return found;
}

inline std::vector<std::string> claims::audiences() const {
    std::vector<std::string> out;
    detail::claims_access::for_each_audience(*this, [&](const detail::json::value& v) { out.push_back(detail::json::unescape(v)); });
    return out;
}

inline std::optional<std::string> claims::string_claim(std::string_view claim) const {
    std::optional<std::string> out;
    detail::find_member(json_.view(), claim, [&](const detail::json::value& v) {
        if (v.type == detail::json::kind::string) out = detail::json::unescape(v);
    });
    return out;
}

inline std::optional<std::int64_t> claims::integer_claim(std::string_view claim) const {
    std::optional<std::int64_t> out;
    detail::find_member(json_.view(), claim, [&](const detail::json::value& v) {
        if (v.type == detail::json::kind::integer) out = v.integer;
    });
    return out;
}

inline bool claims::has(std::string_view claim) const {
    return detail::find_member(json_.view(), claim, [](const detail::json::value&) {});
}

}  // namespace coord::jwt
