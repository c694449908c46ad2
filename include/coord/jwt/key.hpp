// SPDX-License-Identifier: Apache-2.0
// coord/jwt/key.hpp: keys bound to one algorithm, key sets and the JWK/JWKS readers: declarations.
// Part of coord/jwt.hpp (the umbrella); see its banner for the promises.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "coord/error.hpp"
#include "coord/jwt/algorithm.hpp"
#include "coord/result.hpp"

namespace coord::jwt {

/// A key that cannot be loaded: errc::invalid_key and a sentence naming the
/// field and the rule (never the key material).
struct key_error {
    std::error_code code = errc::invalid_key;  ///< errc::invalid_key
    std::string detail;  ///< the field and the rule it broke (never the key material)
    /// The code is `c`.
    friend bool operator==(const key_error& e, errc c) noexcept { return e.code == c; }
};

namespace detail {
struct key_material;
struct key_access;
}  // namespace detail

/// A key bound to one algorithm: an HMAC secret, or an RSA, EC or Ed25519
/// public or private key. Immutable and cheap to copy (shared); safe to use
/// from any number of threads.
class key {
public:
    /// An HMAC key. Throws std::invalid_argument unless `alg` is HS256/384/512
    /// and the secret is at least as long as the hash (RFC 7518 3.2).
    static key hmac(algorithm alg, std::string_view secret, std::string kid = {});

    /// A key from PEM text (SubjectPublicKeyInfo, PKCS#8 or traditional
    /// private key; encrypted keys are refused). Throws std::invalid_argument
    /// when the PEM does not parse or does not suit `alg`: RSA of at least
    /// 2048 bits with an odd exponent >= 3 and no ROCA fingerprint for RS*/PS*,
    /// P-256/384/521 for ES256/384/512, Ed25519 for EdDSA. HMAC algorithms
    /// never take a PEM: an RSA key can never serve as an HMAC secret.
    static key from_pem(algorithm alg, std::string_view pem, std::string kid = {});

    /// The same checks, reporting instead of throwing (for keys from outside).
    static result<key, key_error> try_from_pem(algorithm alg, std::string_view pem, std::string kid = {});
    /// hmac's checks, reporting instead of throwing.
    static result<key, key_error> try_hmac(algorithm alg, std::string_view secret, std::string kid = {});

    /// The algorithm the key is for.
    algorithm alg() const noexcept;
    /// The key's id (empty: none).
    const std::string& kid() const noexcept;
    /// True for HMAC keys and private keys: the key can sign.
    bool can_sign() const noexcept;
    /// True for HMAC keys.
    bool symmetric() const noexcept;

private:
    friend struct detail::key_access;
    explicit key(std::shared_ptr<const detail::key_material> m) : m_(std::move(m)) {}
    std::shared_ptr<const detail::key_material> m_;
};

/// Parses one JWK (RFC 7517, 7518 section 6, RFC 8037) into a key: kty oct
/// (with alg HS*), RSA (alg RS* or PS* from the JWK or `fallback`), EC
/// (alg from crv when absent), OKP Ed25519. Refused: use other than "sig",
/// key_ops without "verify" or "sign", an alg that does not fit the key,
/// private members (d, p, q, ...: coord loads only public keys from JWK;
/// HMAC secrets excepted), coordinates not of the curve's full size, points
/// not on the curve, and the size and exponent rules of key::from_pem.
result<key, key_error> parse_jwk(std::string_view json, std::optional<algorithm> fallback = std::nullopt);

/// A set of keys to verify with, looked up by kid. Rotation: hold the old
/// and the new key at once. A set never mixes HMAC secrets with public keys,
/// and never holds two keys with the same kid. Immutable once built; safe to
/// read from any number of threads.
class key_set {
public:
    key_set() = default;
    /// Throws std::invalid_argument on a duplicate kid or mixed symmetry.
    key_set(std::initializer_list<key> keys) {
        for (const auto& k : keys) add(k);
    }
    /// Adds `k`; throws std::invalid_argument on a duplicate kid or mixed symmetry.
    void add(key k);
    /// The same checks, reporting instead of throwing.
    result<void, key_error> try_add(key k);

    /// The key for a token's (kid, alg): the key with that kid when the token
    /// names one; else the single key with that alg (when the token names a
    /// kid: the single such key without a kid). Null when there is none, or
    /// several (ambiguous). The caller still checks the key's alg.
    const key* find(std::string_view kid, bool has_kid, algorithm alg) const noexcept;
    /// The key with that kid, or null.
    const key* find_kid(std::string_view kid) const noexcept;

    /// How many keys the set holds.
    std::size_t size() const noexcept { return keys_.size(); }
    /// True when it holds none.
    bool empty() const noexcept { return keys_.empty(); }
    /// The keys, in the order they were added.
    const std::vector<key>& keys() const noexcept { return keys_; }

private:
    std::vector<key> keys_;
};

/// Checks a JWS signature (decoded bytes; ECDSA as r || s) over
/// `signing_input` with `k`: the exact check validate() makes after its
/// header steps. A signature of the wrong length is false. Constant-time
/// comparison for HMAC.
bool verify_signature(const key& k, std::string_view signing_input, std::string_view signature);

/// Parses a JWKS ({"keys": [...]}) with parse_jwk's rules for every key and
/// key_set's rules for the set. One bad key refuses the whole set.
result<key_set, key_error> parse_jwks(std::string_view json, std::optional<algorithm> fallback = std::nullopt);

}  // namespace coord::jwt
