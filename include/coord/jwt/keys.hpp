// SPDX-License-Identifier: Apache-2.0
// coord/jwt/keys.hpp: keys, key sets, JWK and JWKS (RFC 7517, 7518, 8037) on OpenSSL.
// Part of coord/jwt.hpp (the umbrella); see its banner for the promises.
#pragma once

#include "coord/jwt/key.hpp"
#include "coord/jwt/openssl.hpp"

namespace coord::jwt {

// --- key ------------------------------------------------------------------

inline result<key, key_error> key::try_hmac(algorithm alg, std::string_view secret, std::string kid) {
    if (detail::family_of(alg) != detail::family::hmac)
        return unexpected(detail::key_refused(std::string(name(alg)) + " is not an HMAC algorithm"));
    if (secret.size() < detail::hash_bytes(alg))
        return unexpected(detail::key_refused(std::string(name(alg)) + " needs a secret of at least " +
                                              std::to_string(detail::hash_bytes(alg)) + " bytes"));
    auto m = std::make_shared<detail::key_material>();
    m->alg = alg;
    m->kid = std::move(kid);
    m->is_private = true;
    m->hmac = std::make_unique<detail::hmac_pool>(alg, secret);
    m->signature_bytes = detail::hash_bytes(alg);
    return key(std::move(m));
}

inline key key::hmac(algorithm alg, std::string_view secret, std::string kid) {
    auto k = try_hmac(alg, secret, std::move(kid));
    if (!k) throw std::invalid_argument("coord::jwt::key::hmac: " + k.error().detail);
    return std::move(*k);
}

inline result<key, key_error> key::try_from_pem(algorithm alg, std::string_view pem, std::string kid) {
    if (detail::family_of(alg) == detail::family::hmac)
        return unexpected(detail::key_refused("an HMAC algorithm never takes a PEM key: use key::hmac with a secret"));
    auto no_password = [](char*, int, int, void*) -> int { return 0; };
    auto read = [&](bool as_private) -> EVP_PKEY* {
        std::unique_ptr<BIO, detail::bio_free> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
        if (!bio) return nullptr;
        return as_private ? PEM_read_bio_PrivateKey(bio.get(), nullptr, no_password, nullptr)
                          : PEM_read_bio_PUBKEY(bio.get(), nullptr, no_password, nullptr);
    };
    const bool is_private = pem.find("PRIVATE KEY-----") != std::string_view::npos;
    detail::pkey_ptr pkey(read(is_private));
    if (!pkey) return unexpected(detail::key_refused("PEM text does not hold a readable unencrypted key"));
    return detail::make_pkey_key(alg, std::move(pkey), is_private, std::move(kid));
}

inline key key::from_pem(algorithm alg, std::string_view pem, std::string kid) {
    auto k = try_from_pem(alg, pem, std::move(kid));
    if (!k) throw std::invalid_argument("coord::jwt::key::from_pem: " + k.error().detail);
    return std::move(*k);
}

inline algorithm key::alg() const noexcept { return m_->alg; }
inline const std::string& key::kid() const noexcept { return m_->kid; }
inline bool key::can_sign() const noexcept { return m_->is_private; }
inline bool key::symmetric() const noexcept { return detail::family_of(m_->alg) == detail::family::hmac; }

// --- key_set --------------------------------------------------------------

inline result<void, key_error> key_set::try_add(key k) {
    if (!keys_.empty() && keys_.front().symmetric() != k.symmetric())
        return unexpected(detail::key_refused("a key set never mixes HMAC secrets with public keys"));
    if (!k.kid().empty())
        for (const auto& other : keys_)
            if (other.kid() == k.kid()) return unexpected(detail::key_refused("duplicate kid in key set"));
    keys_.push_back(std::move(k));
    return {};
}

inline void key_set::add(key k) {
    if (auto ok = try_add(std::move(k)); !ok) throw std::invalid_argument("coord::jwt::key_set: " + ok.error().detail);
}

inline const key* key_set::find_kid(std::string_view kid) const noexcept {
    for (const auto& k : keys_)
        if (k.kid() == kid) return &k;
    return nullptr;
}

inline const key* key_set::find(std::string_view kid, bool has_kid, algorithm alg) const noexcept {
    if (has_kid)
        if (const key* k = find_kid(kid)) return k;
    // No key has the token's kid (or the token names none): the single
    // candidate with the token's alg, where a token's kid rules out keys that
    // carry another kid. Several candidates: ambiguous, refused.
    const key* found = nullptr;
    for (const auto& k : keys_) {
        if (k.alg() != alg || (has_kid && !k.kid().empty())) continue;
        if (found) return nullptr;
        found = &k;
    }
    return found;
}

// --- JWK ------------------------------------------------------------------

namespace detail {

struct jwk_fields {
    std::optional<std::string> kty, alg, kid, use, crv, k, n, e, x, y;
    bool has_private = false;
    bool key_ops_seen = false, key_ops_ok = false;
};

inline result<jwk_fields, key_error> read_jwk(std::string_view text) {
    jwk_fields f;
    json::reader r(text, 8);
    std::string bad;
    const bool ok = r.read_object([&](const json::value& k, const json::value& v) {
        const std::string key_name = json::unescape(k);
        auto text_field = [&](std::optional<std::string>& slot) {
            if (v.type != json::kind::string) {
                bad = "JWK member " + key_name + " must be a string";
                return false;
            }
            slot = json::unescape(v);
            return true;
        };
        if (key_name == "kty") return text_field(f.kty);
        if (key_name == "alg") return text_field(f.alg);
        if (key_name == "kid") return text_field(f.kid);
        if (key_name == "use") return text_field(f.use);
        if (key_name == "crv") return text_field(f.crv);
        if (key_name == "k") return text_field(f.k);
        if (key_name == "n") return text_field(f.n);
        if (key_name == "e") return text_field(f.e);
        if (key_name == "x") return text_field(f.x);
        if (key_name == "y") return text_field(f.y);
        if (key_name == "d" || key_name == "p" || key_name == "q" || key_name == "dp" || key_name == "dq" ||
            key_name == "qi" || key_name == "oth")
            f.has_private = true;
        if (key_name == "key_ops") {
            f.key_ops_seen = true;
            if (v.type != json::kind::array) {
                bad = "JWK key_ops must be an array";
                return false;
            }
            json::for_each_element(v, [&](const json::value& op) {
                if (op.type == json::kind::string && (json::equals(op, "verify") || json::equals(op, "sign")))
                    f.key_ops_ok = true;
            });
        }
        return true;
    });
    if (!bad.empty()) return unexpected(key_refused(bad));
    if (!ok) return unexpected(key_refused("JWK is not one JSON object (or repeats a member)"));
    return f;
}

inline result<std::string, key_error> jwk_bytes(const std::optional<std::string>& field, const char* what) {
    if (!field) return unexpected(key_refused(std::string("JWK lacks ") + what));
    std::string out;
    if (!base64url_decode(*field, out))
        return unexpected(key_refused(std::string("JWK member ") + what + " is not canonical base64url"));
    return out;
}

inline pkey_ptr pkey_fromdata(const char* type, OSSL_PARAM_BLD* bld) {
    std::unique_ptr<OSSL_PARAM, params_free> params(OSSL_PARAM_BLD_to_param(bld));
    std::unique_ptr<EVP_PKEY_CTX, pkey_ctx_free> ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
    EVP_PKEY* out = nullptr;
    if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
        EVP_PKEY_fromdata(ctx.get(), &out, EVP_PKEY_PUBLIC_KEY, params.get()) != 1)
        return nullptr;
    return pkey_ptr(out);
}

}  // namespace detail

inline result<key, key_error> parse_jwk(std::string_view json_text, std::optional<algorithm> fallback) {
    using detail::key_refused;
    auto fr = detail::read_jwk(json_text);
    if (!fr) return unexpected(fr.error());
    const auto& f = *fr;
    if (!f.kty) return unexpected(key_refused("JWK lacks kty"));
    if (f.use && *f.use != "sig") return unexpected(key_refused("JWK use is not \"sig\""));
    if (f.key_ops_seen && !f.key_ops_ok) return unexpected(key_refused("JWK key_ops allows neither verify nor sign"));
    std::optional<algorithm> alg;
    if (f.alg) {
        alg = algorithm_from_name(*f.alg);
        if (!alg) return unexpected(key_refused("JWK alg is not a JWS algorithm coord implements"));
    }
    std::string kid = f.kid.value_or("");

    if (*f.kty == "oct") {
        if (!alg) alg = fallback;
        if (!alg) return unexpected(key_refused("an oct JWK must name its alg"));
        auto secret = detail::jwk_bytes(f.k, "k");
        if (!secret) return unexpected(secret.error());
        auto k = key::try_hmac(*alg, *secret, std::move(kid));
        OPENSSL_cleanse(secret->data(), secret->size());
        return k;
    }
    if (f.has_private) return unexpected(key_refused("JWK holds private key members: load public keys only"));
    if (*f.kty == "RSA") {
        if (!alg) alg = fallback;
        if (!alg) return unexpected(key_refused("an RSA JWK must name its alg (RS* or PS*)"));
        auto n = detail::jwk_bytes(f.n, "n");
        if (!n) return unexpected(n.error());
        auto e = detail::jwk_bytes(f.e, "e");
        if (!e) return unexpected(e.error());
        if (n->empty() || e->empty() || (*n)[0] == '\0' || (*e)[0] == '\0')
            return unexpected(key_refused("JWK n and e must be minimal big-endian integers"));
        detail::bn_ptr bn_n(BN_bin2bn(reinterpret_cast<const unsigned char*>(n->data()), static_cast<int>(n->size()), nullptr));
        detail::bn_ptr bn_e(BN_bin2bn(reinterpret_cast<const unsigned char*>(e->data()), static_cast<int>(e->size()), nullptr));
        std::unique_ptr<OSSL_PARAM_BLD, detail::param_bld_free> bld(OSSL_PARAM_BLD_new());
        if (!bn_n || !bn_e || !bld || OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) != 1 ||
            OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get()) != 1)
            return unexpected(key_refused("RSA JWK could not be built"));
        auto pkey = detail::pkey_fromdata("RSA", bld.get());
        if (!pkey) return unexpected(key_refused("RSA JWK could not be built"));
        return detail::make_pkey_key(*alg, std::move(pkey), false, std::move(kid));
    }
    if (*f.kty == "EC") {
        if (!f.crv) return unexpected(key_refused("EC JWK lacks crv"));
        std::optional<algorithm> by_curve = *f.crv == "P-256"   ? std::optional(algorithm::es256)
                                            : *f.crv == "P-384" ? std::optional(algorithm::es384)
                                            : *f.crv == "P-521" ? std::optional(algorithm::es512)
                                                                : std::nullopt;
        if (!by_curve) return unexpected(key_refused("EC JWK crv is not P-256, P-384 or P-521"));
        if (alg && *alg != *by_curve) return unexpected(key_refused("EC JWK alg does not match its crv"));
        if (!alg && fallback && *fallback != *by_curve) return unexpected(key_refused("EC JWK crv does not match the algorithm"));
        alg = by_curve;
        auto x = detail::jwk_bytes(f.x, "x");
        if (!x) return unexpected(x.error());
        auto y = detail::jwk_bytes(f.y, "y");
        if (!y) return unexpected(y.error());
        const std::size_t size = detail::ec_field_bytes(*alg);
        if (x->size() != size || y->size() != size)
            return unexpected(key_refused("EC JWK coordinates must have the curve's full size"));
        std::string point = "\x04" + *x + *y;
        std::unique_ptr<OSSL_PARAM_BLD, detail::param_bld_free> bld(OSSL_PARAM_BLD_new());
        if (!bld ||
            OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, detail::ec_group(*alg), 0) != 1 ||
            OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()) != 1)
            return unexpected(key_refused("EC JWK could not be built"));
        auto pkey = detail::pkey_fromdata("EC", bld.get());
        if (!pkey) return unexpected(key_refused("EC JWK is not a point of its curve"));
        return detail::make_pkey_key(*alg, std::move(pkey), false, std::move(kid));
    }
    if (*f.kty == "OKP") {
        if (!f.crv || *f.crv != "Ed25519") return unexpected(key_refused("OKP JWK crv must be Ed25519"));
        if (alg && *alg != algorithm::eddsa) return unexpected(key_refused("Ed25519 JWK alg must be EdDSA"));
        auto x = detail::jwk_bytes(f.x, "x");
        if (!x) return unexpected(x.error());
        if (x->size() != 32) return unexpected(key_refused("Ed25519 JWK x must be 32 bytes"));
        detail::pkey_ptr pkey(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                                          reinterpret_cast<const unsigned char*>(x->data()), 32));
        if (!pkey) return unexpected(key_refused("Ed25519 JWK could not be built"));
        return detail::make_pkey_key(algorithm::eddsa, std::move(pkey), false, std::move(kid));
    }
    return unexpected(key_refused("JWK kty is not oct, RSA, EC or OKP"));
}

inline result<key_set, key_error> parse_jwks(std::string_view json_text, std::optional<algorithm> fallback) {
    key_set set;
    std::optional<key_error> failed;
    bool saw_keys = false;
    detail::json::reader r(json_text, 10);
    const bool ok = r.read_object([&](const detail::json::value& k, const detail::json::value& v) {
        if (!detail::json::equals(k, "keys")) return true;
        saw_keys = true;
        if (v.type != detail::json::kind::array) {
            failed = detail::key_refused("JWKS keys must be an array");
            return false;
        }
        detail::json::for_each_element(v, [&](const detail::json::value& element) {
            if (failed) return;
            auto one = parse_jwk(element.raw, fallback);
            if (!one) {
                failed = one.error();
                return;
            }
            if (auto added = set.try_add(std::move(*one)); !added) failed = added.error();
        });
        return !failed;
    });
    if (failed) return unexpected(*failed);
    if (!ok) return unexpected(detail::key_refused("JWKS is not one JSON object (or repeats a member)"));
    if (!saw_keys) return unexpected(detail::key_refused("JWKS lacks keys"));
    return set;
}

inline bool verify_signature(const key& k, std::string_view signing_input, std::string_view signature) {
    return detail::verify_signature(detail::key_access::of(k), signing_input,
                                    reinterpret_cast<const unsigned char*>(signature.data()), signature.size());
}

}  // namespace coord::jwt
