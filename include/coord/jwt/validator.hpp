// SPDX-License-Identifier: Apache-2.0
// coord/jwt/validator.hpp: the strict token validator: header steps, key selection, signature, claims.
// Part of coord/jwt.hpp (the umbrella); see its banner for the promises.
#pragma once

#include "coord/clock.hpp"
#include "coord/jwt/claims.hpp"
#include "coord/jwt/keys.hpp"

namespace coord::jwt {

/// What a validator checks besides the signature.
struct validation_options {
    /// iss must equal this exactly (empty: not checked).
    std::string issuer;
    /// aud (a string or an array of strings) must hold one of these
    /// exactly (empty: not checked).
    std::vector<std::string> audiences;
    /// The header's typ must be this, compared as RFC 7515 4.1.9 says: case
    /// insensitive, "application/" optional (empty: not checked).
    std::string type;
    /// Clock skew allowed on exp, nbf and iat; 0 to 1 day.
    std::chrono::seconds leeway{0};
    /// Refuse tokens whose iat is older than this (needs iat).
    std::optional<std::chrono::seconds> max_age;
    /// Claims that must be present. exp by default: a token that never
    /// expires is refused unless the application removes it from this list.
    std::vector<std::string> required_claims{"exp"};
    /// Header parameters the application processes itself and so accepts in
    /// crit; any other crit member refuses the token.
    std::vector<std::string> understood_critical;
    /// Longest token accepted, checked before any decoding; 64 B to 1 MiB.
    std::size_t max_token_bytes = 8192;
    /// Deepest JSON nesting accepted in header and claims; 1 to 64.
    std::size_t max_json_depth = 16;
};


/// A revocation store that revokes nothing (the default).
struct no_revocation {
    /// Always false: no token is revoked.
    result<bool> token_revoked(std::string_view, std::string_view, std::optional<std::int64_t>, std::int64_t) {
        return false;
    }
};

/// Validates tokens against a key set on a Clock (one reading per token) and,
/// optionally, a revocation store (not owned; one call per token that passes
/// every other check). validate() and verify() are safe from any number of
/// threads, also while set_keys() swaps the key set.
template <unix_clock Clock = system_clock, class Revocation = no_revocation>
class basic_validator {
public:
    /// Throws std::invalid_argument naming the field for out-of-range options.
    basic_validator(key_set keys, validation_options options, Clock clock = Clock{},
                    Revocation* revocation = nullptr);

    /// Replaces the key set atomically: a token is checked wholly against the
    /// old set or wholly against the new one.
    void set_keys(key_set keys) {
        auto fresh = std::make_shared<const key_set>(std::move(keys));
        std::lock_guard lk(keys_mutex_);
        keys_.swap(fresh);  // the old set dies outside the lock, or with its last reader
        keys_version_.store(next_keys_version(), std::memory_order_release);
    }

    /// The whole JWT check: the JWS steps, then the claims (types and ranges,
    /// exp, nbf, iat, max age, iss, aud, typ, required claims, revocation).
    /// One reading of the clock. Every refusal is one errc::token_* value;
    /// a revocation store's infrastructure error is passed through.
    [[nodiscard]] result<claims> validate(std::string_view token) const;

    /// The JWS steps only (size, parts, base64url, header, alg and key, crit,
    /// signature); the payload may be any bytes. For JWS that are not JWTs.
    [[nodiscard]] result<verified_jws> verify(std::string_view token) const;

    /// The options in force.
    const validation_options& options() const noexcept { return options_; }

private:
    // The key set: a shared_ptr under a mutex, swapped whole by set_keys().
    // Each set gets a version unique in the process. A thread keeps the last
    // set it used with its version (so a validation takes the mutex and
    // touches the shared count only after a swap, or when the thread last
    // used another validator), and the last header that passed every header
    // step under it: a token whose header text is byte-identical (the usual
    // case: one issuer key signs many tokens) reuses that judgment instead of
    // decoding and parsing the header again. A swapped-out set stays alive in
    // an idle thread's cache until that thread validates again or exits; it
    // is never used after the swap.
    mutable std::mutex keys_mutex_;
    std::shared_ptr<const key_set> keys_;
    std::atomic<std::uint64_t> keys_version_{next_keys_version()};

    static std::uint64_t next_keys_version() noexcept {
        static std::atomic<std::uint64_t> last{0};
        return last.fetch_add(1, std::memory_order_relaxed) + 1;
    }
    struct thread_cache {
        std::uint64_t version = 0;
        std::shared_ptr<const key_set> keys;
        std::string header_b64;          // the remembered header's text, as in the token
        header hdr;                      // what it says
        const key* header_key = nullptr;  // the key it selects in `keys`; null: nothing remembered
    };
    static constexpr std::size_t max_remembered_header = 512;
    // This thread's cache, current for this validator: valid until this
    // thread asks a validator of the same type again (verify_into does not
    // call out while it uses it).
    thread_cache& this_thread() const {
        thread_local thread_cache mine;
        if (mine.version != keys_version_.load(std::memory_order_acquire)) {
            mine.header_key = nullptr;
            std::lock_guard lk(keys_mutex_);
            mine.keys = keys_;
            mine.version = keys_version_.load(std::memory_order_relaxed);
        }
        return mine;
    }
    validation_options options_;
    Clock clock_;
    Revocation* revocation_;

    // The JWS steps of verify(), writing the header and payload in place (so
    // validate() decodes straight into its claims); errc{} when verified.
    template <class Payload>
    errc verify_into(std::string_view token, header& hdr, Payload& payload) const;
    // The header steps: JSON, alg, key selection, crit. Fills hdr and k.
    errc judge_header(std::string_view header_text, const key_set& keys, header& hdr, const key*& k) const;
    result<void> check_claims(const claims& c, std::int64_t now_ms) const;

    // options_.required_claims, sorted once: the registered ones as bits,
    // the others by name.
    enum : unsigned {
        registered_exp = 1,
        registered_nbf = 2,
        registered_iat = 4,
        registered_iss = 8,
        registered_sub = 16,
        registered_jti = 32,
        registered_aud = 64
    };
    unsigned required_registered_ = 0;
    std::vector<std::string> required_other_;
};

using validator = basic_validator<system_clock>;


namespace detail {

/// Reads a JOSE header. Fills `hdr` (alg as text first); errc on refusal.
struct raw_header {
    bool alg_seen = false;
    json::value alg_value;
    std::optional<std::string> kid, typ, cty;
    json::value crit;
    bool has_crit = false;
};

inline errc read_header(std::string_view text, std::size_t max_depth, raw_header& h) {
    json::reader r(text, max_depth);
    bool wrong_type = false;
    const bool ok = r.read_object([&](const json::value& k, const json::value& v) {
        const std::string name = k.escaped ? json::unescape(k) : std::string();
        const std::string_view n = k.escaped ? std::string_view(name) : k.body();
        std::optional<std::string>* slot = nullptr;
        switch (json::code3(n)) {
        case json::code3("alg"):
            if (v.type != json::kind::string) return !(wrong_type = true);
            h.alg_seen = true;
            h.alg_value = v;
            return true;
        case json::code3("kid"): slot = &h.kid; break;
        case json::code3("typ"): slot = &h.typ; break;
        case json::code3("cty"): slot = &h.cty; break;
        default:
            if (n == "crit") {
                h.crit = v;
                h.has_crit = true;
            }
            return true;
        }
        if (v.type != json::kind::string) return !(wrong_type = true);
        *slot = json::unescape(v);
        return true;
    });
    if (wrong_type) return errc::token_malformed;
    if (!ok) return errc::token_bad_json;
    if (!h.alg_seen) return errc::token_malformed;
    return {};
}

inline bool iequals_ascii(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        char x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
        if (x != y) return false;
    }
    return true;
}

/// typ comparison of RFC 7515 4.1.9: case-insensitive, "application/" optional.
inline bool same_type(std::string_view got, std::string_view want) noexcept {
    auto strip = [](std::string_view t) {
        if (t.size() > 12 && iequals_ascii(t.substr(0, 12), "application/")) t.remove_prefix(12);
        return t;
    };
    return iequals_ascii(strip(got), strip(want));
}

}  // namespace detail

// --- validator ------------------------------------------------------------

template <unix_clock Clock, class Revocation>
basic_validator<Clock, Revocation>::basic_validator(key_set keys, validation_options options, Clock clock,
                                                    Revocation* revocation)
    : keys_(std::make_shared<const key_set>(std::move(keys))),
      options_(std::move(options)),
      clock_(std::move(clock)),
      revocation_(revocation) {
    if (options_.leeway < std::chrono::seconds(0) || options_.leeway > std::chrono::hours(24))
        throw std::invalid_argument("coord::jwt::validation_options::leeway must be 0 to 1 day");
    if (options_.max_age && (*options_.max_age <= std::chrono::seconds(0) ||
                             options_.max_age->count() > max_numeric_date))
        throw std::invalid_argument("coord::jwt::validation_options::max_age must be positive");
    if (options_.max_token_bytes < 64 || options_.max_token_bytes > (1u << 20))
        throw std::invalid_argument("coord::jwt::validation_options::max_token_bytes must be 64 B to 1 MiB");
    if (options_.max_json_depth < 1 || options_.max_json_depth > 64)
        throw std::invalid_argument("coord::jwt::validation_options::max_json_depth must be 1 to 64");
    for (const auto& name : options_.required_claims) {
        const unsigned bit = name == "exp"   ? registered_exp
                             : name == "nbf" ? registered_nbf
                             : name == "iat" ? registered_iat
                             : name == "iss" ? registered_iss
                             : name == "sub" ? registered_sub
                             : name == "jti" ? registered_jti
                             : name == "aud" ? registered_aud
                                             : 0u;
        if (bit != 0) required_registered_ |= bit;
        else required_other_.push_back(name);
    }
}

template <unix_clock Clock, class Revocation>
result<verified_jws> basic_validator<Clock, Revocation>::verify(std::string_view token) const {
    result<verified_jws> out;
    if (const errc e = verify_into(token, out->hdr, out->payload); e != errc{}) out = unexpected(e);
    return out;
}

template <unix_clock Clock, class Revocation>
template <class Payload>
errc basic_validator<Clock, Revocation>::verify_into(std::string_view token, header& hdr, Payload& payload) const {
    if (token.size() > options_.max_token_bytes) return errc::token_too_large;
    const std::size_t dot1 = token.find('.');
    if (dot1 == std::string_view::npos) return errc::token_malformed;
    const std::size_t dot2 = token.find('.', dot1 + 1);
    if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos)
        return errc::token_malformed;
    const std::string_view h64 = token.substr(0, dot1);
    const std::string_view p64 = token.substr(dot1 + 1, dot2 - dot1 - 1);
    const std::string_view s64 = token.substr(dot2 + 1);
    if (h64.empty() || s64.empty()) return errc::token_malformed;

    thread_cache& cache = this_thread();
    const bool remembered = cache.header_key != nullptr && h64 == cache.header_b64;
    // Headers are short: decode into the stack unless this one is not.
    std::array<char, 512> header_buffer;
    std::string header_heap;
    std::string_view header_text;
    if (h64.size() % 4 == 1) return errc::token_bad_encoding;
    if (!remembered) {  // a remembered header was decoded and judged before, byte for byte
        if (detail::base64url_decoded_size(h64.size()) <= header_buffer.size()) {
            if (!detail::base64url_decode(h64, reinterpret_cast<unsigned char*>(header_buffer.data())))
                return errc::token_bad_encoding;
            header_text = std::string_view(header_buffer.data(), detail::base64url_decoded_size(h64.size()));
        } else {
            if (!detail::base64url_decode(h64, header_heap)) return errc::token_bad_encoding;
            header_text = header_heap;
        }
    }
    if (p64.size() % 4 == 1 || s64.size() % 4 == 1) return errc::token_bad_encoding;
    if (!detail::base64url_decode(p64, reinterpret_cast<unsigned char*>(detail::prepare_payload(
                                           payload, detail::base64url_decoded_size(p64.size())))))
        return errc::token_bad_encoding;
    std::array<unsigned char, 2048> sig;  // filled by the decoder, read only up to sig_len
    const std::size_t sig_len = detail::base64url_decoded_size(s64.size());
    if (sig_len > sig.size()) return errc::token_bad_signature;
    if (!detail::base64url_decode(s64, sig.data())) return errc::token_bad_encoding;

    const key* k = cache.header_key;
    if (remembered) {
        hdr = cache.hdr;
    } else {
        if (const errc e = judge_header(header_text, *cache.keys, hdr, k); e != errc{}) return e;
        if (h64.size() <= max_remembered_header) {
            cache.header_b64.assign(h64);
            cache.hdr = hdr;
            cache.header_key = k;
        }
    }

    if (!detail::verify_signature(detail::key_access::of(*k), token.substr(0, dot2), sig.data(), sig_len))
        return errc::token_bad_signature;
    return {};
}

template <unix_clock Clock, class Revocation>
errc basic_validator<Clock, Revocation>::judge_header(std::string_view header_text, const key_set& keys, header& hdr,
                                                      const key*& k) const {
    detail::raw_header h;
    if (const errc e = detail::read_header(header_text, options_.max_json_depth, h); e != errc{}) return e;
    const auto alg = h.alg_value.escaped ? algorithm_from_name(detail::json::unescape(h.alg_value))
                                         : algorithm_from_name(h.alg_value.body());
    if (!alg) return errc::token_alg_refused;  // none, in any casing, included

    k = keys.find(h.kid ? std::string_view(*h.kid) : std::string_view{}, h.kid.has_value(), *alg);
    if (!k) return errc::token_unknown_key;
    if (k->alg() != *alg) return errc::token_alg_refused;

    if (h.has_crit) {
        // RFC 7515 4.1.11: a non-empty array of names, each understood.
        if (h.crit.type != detail::json::kind::array) return errc::token_unknown_crit;
        bool understood = true, any = false;
        detail::json::for_each_element(h.crit, [&](const detail::json::value& v) {
            any = true;
            if (v.type != detail::json::kind::string) {
                understood = false;
                return;
            }
            const std::string crit_name = detail::json::unescape(v);
            if (std::find(options_.understood_critical.begin(), options_.understood_critical.end(), crit_name) ==
                options_.understood_critical.end())
                understood = false;
        });
        if (!understood || !any) return errc::token_unknown_crit;
    }
    hdr.alg = *alg;
    hdr.kid = std::move(h.kid);
    hdr.typ = std::move(h.typ);
    hdr.cty = std::move(h.cty);
    return {};
}

// g++ 12 at -O1 (the TSan build) reports the error assigned over `out` below
// as maybe-uninitialized: a false positive in its variant analysis. Returning
// the error as a new object instead would cost a move of the claims on the
// success path (measured +2% per HS256 validation).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <unix_clock Clock, class Revocation>
result<claims> basic_validator<Clock, Revocation>::validate(std::string_view token) const {
    // Built in place and returned as one object: no claims or header moves.
    result<claims> out;
    claims& c = *out;
    errc e = verify_into(token, detail::claims_access::hdr(c), detail::claims_access::payload(c));
    if (e == errc{}) e = detail::claims_access::read(c, options_.max_json_depth);
    if (e != errc{}) {
        out = unexpected(e);
    } else if (auto ok = check_claims(c, unix_millis(clock_.now())); !ok) {
        out = unexpected(ok.error());
    }
    return out;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

template <unix_clock Clock, class Revocation>
result<void> basic_validator<Clock, Revocation>::check_claims(const claims& c, std::int64_t now_ms) const {
    const std::int64_t leeway_ms = std::chrono::duration_cast<std::chrono::milliseconds>(options_.leeway).count();
    // Registered claims were read already; others need a look at the payload.
    if (((required_registered_ & registered_exp) && !c.exp()) || ((required_registered_ & registered_nbf) && !c.nbf()) ||
        ((required_registered_ & registered_iat) && !c.iat()) || ((required_registered_ & registered_iss) && !c.iss()) ||
        ((required_registered_ & registered_sub) && !c.sub()) || ((required_registered_ & registered_jti) && !c.jti()) ||
        ((required_registered_ & registered_aud) && !c.has_aud()))
        return unexpected(errc::token_missing_claim);
    for (const auto& other : required_other_)
        if (!c.has(other)) return unexpected(errc::token_missing_claim);
    const header& h = c.hdr();
    if (!options_.type.empty() && (!h.typ || !detail::same_type(*h.typ, options_.type)))
        return unexpected(errc::token_wrong_type);
    // NumericDates are at most max_numeric_date, so * 1000 cannot overflow.
    const auto exp = c.exp(), nbf = c.nbf(), iat = c.iat();
    if (exp && now_ms >= *exp * 1000 + leeway_ms) return unexpected(errc::token_expired);
    if (nbf && now_ms + leeway_ms < *nbf * 1000) return unexpected(errc::token_not_yet_valid);
    if (iat && now_ms + leeway_ms < *iat * 1000) return unexpected(errc::token_not_yet_valid);
    if (options_.max_age) {
        if (!iat) return unexpected(errc::token_missing_claim);
        const std::int64_t age_ms = std::chrono::duration_cast<std::chrono::milliseconds>(*options_.max_age).count();
        if (now_ms - *iat * 1000 > age_ms + leeway_ms) return unexpected(errc::token_too_old);
    }
    if (!options_.issuer.empty()) {
        const auto iss = c.iss();
        if (!iss) return unexpected(errc::token_missing_claim);
        if (*iss != options_.issuer) return unexpected(errc::token_wrong_issuer);
    }
    if (!options_.audiences.empty()) {
        if (!c.has_aud()) return unexpected(errc::token_missing_claim);
        bool match = false;
        for (const auto& a : options_.audiences) match = match || c.has_audience(a);
        if (!match) return unexpected(errc::token_wrong_audience);
    }
    if (revocation_) {
        auto revoked = revocation_->token_revoked(c.jti().value_or(std::string_view{}), c.sub().value_or(std::string_view{}),
                                                  iat, now_ms / 1000);
        if (!revoked) return unexpected(revoked.error());
        if (*revoked) return unexpected(errc::token_revoked);
    }
    return {};
}

}  // namespace coord::jwt
