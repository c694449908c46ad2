// SPDX-License-Identifier: Apache-2.0
// coord/jwt/signer.hpp: signing tokens with an HMAC or private key.
// Part of coord/jwt.hpp (the umbrella); see its banner for the promises.
#pragma once

#include "coord/jwt/claims.hpp"
#include "coord/jwt/keys.hpp"

namespace coord::jwt {

/// Signs tokens with a key that can sign (an HMAC key or a private key).
/// Safe from any number of threads.
class signer {
public:
    /// Throws std::invalid_argument when `k` cannot sign.
    explicit signer(key k);

    /// A compact JWS of `claims_json` with header {"alg","typ":"JWT","kid"}.
    /// errc::token_bad_json unless claims_json is one JSON object (no
    /// duplicate names). Throws only on OpenSSL failure (std::runtime_error).
    [[nodiscard]] result<std::string> sign(std::string_view claims_json) const;

    /// A compact JWS of arbitrary payload bytes, with the given typ (empty:
    /// no typ member).
    std::string sign_payload(std::string_view payload, std::string_view typ = {}) const;

    /// The key it signs with.
    const key& signing_key() const noexcept { return key_; }

private:
    key key_;
};


// --- signer ---------------------------------------------------------------

inline signer::signer(key k) : key_(std::move(k)) {
    if (!key_.can_sign()) throw std::invalid_argument("coord::jwt::signer: the key cannot sign (a public key)");
}

inline std::string signer::sign_payload(std::string_view payload, std::string_view typ) const {
    std::string header = "{\"alg\":\"";
    header += name(key_.alg());
    header += '"';
    if (!typ.empty()) {
        header += ",\"typ\":";
        detail::json::append_quoted(typ, header);
    }
    if (!key_.kid().empty()) {
        header += ",\"kid\":";
        detail::json::append_quoted(key_.kid(), header);
    }
    header += '}';
    std::string token;
    detail::base64url_append(header.data(), header.size(), token);
    token += '.';
    detail::base64url_append(payload.data(), payload.size(), token);
    const std::string sig = detail::sign_with(detail::key_access::of(key_), token);
    token += '.';
    detail::base64url_append(sig.data(), sig.size(), token);
    return token;
}

inline result<std::string> signer::sign(std::string_view claims_json) const {
    detail::json::reader r(claims_json, 64);
    if (!r.read_object([](const detail::json::value&, const detail::json::value&) { return true; }))
        return unexpected(errc::token_bad_json);
    return sign_payload(claims_json, "JWT");
}

}  // namespace coord::jwt
