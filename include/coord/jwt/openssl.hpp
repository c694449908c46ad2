// SPDX-License-Identifier: Apache-2.0
// coord/jwt/openssl.hpp: the OpenSSL detail behind keys, signatures and MACs (namespace coord::jwt::detail).
// Part of coord/jwt.hpp (the umbrella); see its banner for the promises.
#pragma once

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

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
#include "coord/jwt/key.hpp"
#include "coord/result.hpp"

namespace coord::jwt {

namespace detail {

namespace json = coord::detail::json;
using coord::detail::base64url_append;
using coord::detail::base64url_decode;
using coord::detail::base64url_decoded_size;

enum class family : std::uint8_t { hmac, rsa, rsa_pss, ecdsa, eddsa };

constexpr family family_of(algorithm a) noexcept {
    switch (a) {
    case algorithm::hs256: case algorithm::hs384: case algorithm::hs512: return family::hmac;
    case algorithm::rs256: case algorithm::rs384: case algorithm::rs512: return family::rsa;
    case algorithm::ps256: case algorithm::ps384: case algorithm::ps512: return family::rsa_pss;
    case algorithm::es256: case algorithm::es384: case algorithm::es512: return family::ecdsa;
    case algorithm::eddsa: return family::eddsa;
    }
    return family::hmac;
}

/// The hash's output size in bytes (0 for EdDSA, which hashes internally).
constexpr std::size_t hash_bytes(algorithm a) noexcept {
    switch (a) {
    case algorithm::hs256: case algorithm::rs256: case algorithm::ps256: case algorithm::es256: return 32;
    case algorithm::hs384: case algorithm::rs384: case algorithm::ps384: case algorithm::es384: return 48;
    case algorithm::hs512: case algorithm::rs512: case algorithm::ps512: case algorithm::es512: return 64;
    case algorithm::eddsa: return 0;
    }
    return 0;
}

/// The byte size of one ECDSA coordinate (and of r and s).
constexpr std::size_t ec_field_bytes(algorithm a) noexcept {
    return a == algorithm::es256 ? 32 : a == algorithm::es384 ? 48 : 66;
}

constexpr const char* ec_group(algorithm a) noexcept {
    return a == algorithm::es256 ? "prime256v1" : a == algorithm::es384 ? "secp384r1" : "secp521r1";
}

/// The digest, fetched once (a per-call implicit fetch costs more than the
/// HMAC of a token).
inline const EVP_MD* digest(algorithm a) {
    static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    static EVP_MD* const sha384 = EVP_MD_fetch(nullptr, "SHA384", nullptr);
    static EVP_MD* const sha512 = EVP_MD_fetch(nullptr, "SHA512", nullptr);
    switch (hash_bytes(a)) {
    case 32: return sha256;
    case 48: return sha384;
    case 64: return sha512;
    default: return nullptr;
    }
}

inline const char* digest_name(algorithm a) noexcept {
    return hash_bytes(a) == 32 ? "SHA256" : hash_bytes(a) == 48 ? "SHA384" : "SHA512";
}

struct pkey_free {
    void operator()(EVP_PKEY* p) const noexcept { EVP_PKEY_free(p); }
};
struct bn_free {
    void operator()(BIGNUM* p) const noexcept { BN_free(p); }
};
struct md_ctx_free {
    void operator()(EVP_MD_CTX* p) const noexcept { EVP_MD_CTX_free(p); }
};
struct pkey_ctx_free {
    void operator()(EVP_PKEY_CTX* p) const noexcept { EVP_PKEY_CTX_free(p); }
};
struct bio_free {
    void operator()(BIO* p) const noexcept { BIO_free(p); }
};
struct param_bld_free {
    void operator()(OSSL_PARAM_BLD* p) const noexcept { OSSL_PARAM_BLD_free(p); }
};
struct params_free {
    void operator()(OSSL_PARAM* p) const noexcept { OSSL_PARAM_free(p); }
};
using pkey_ptr = std::unique_ptr<EVP_PKEY, pkey_free>;
using bn_ptr = std::unique_ptr<BIGNUM, bn_free>;

/// Pre-keyed HMAC contexts: a verification takes one, re-initialises it with
/// the stored key (no re-keying), and gives it back. Several threads get
/// several contexts.
class hmac_pool {
public:
    hmac_pool(algorithm alg, std::string_view secret) {
        mac_ = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
        if (!mac_) throw std::runtime_error("coord: OpenSSL has no HMAC");
        template_ = EVP_MAC_CTX_new(mac_);
        OSSL_PARAM params[] = {
            OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, const_cast<char*>(digest_name(alg)), 0),
            OSSL_PARAM_construct_end()};
        if (!template_ || EVP_MAC_init(template_, reinterpret_cast<const unsigned char*>(secret.data()),
                                       secret.size(), params) != 1) {
            EVP_MAC_CTX_free(template_);
            EVP_MAC_free(mac_);
            throw std::runtime_error("coord: HMAC initialisation failed");
        }
    }
    hmac_pool(const hmac_pool&) = delete;
    hmac_pool& operator=(const hmac_pool&) = delete;
    ~hmac_pool() {
        for (auto* c : free_) EVP_MAC_CTX_free(c);
        EVP_MAC_CTX_free(template_);
        EVP_MAC_free(mac_);
    }

    /// The MAC of `data` into `out` (at least 64 bytes); its length, 0 on failure.
    std::size_t mac(std::string_view data, unsigned char* out) const {
        EVP_MAC_CTX* ctx = take();
        if (!ctx) return 0;
        std::size_t len = 0;
        const bool ok = EVP_MAC_init(ctx, nullptr, 0, nullptr) == 1 &&
                        EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(data.data()), data.size()) == 1 &&
                        EVP_MAC_final(ctx, out, &len, 64) == 1;
        give_back(ctx);
        return ok ? len : 0;
    }

private:
    EVP_MAC* mac_ = nullptr;
    EVP_MAC_CTX* template_ = nullptr;
    mutable std::mutex mutex_;
    mutable std::vector<EVP_MAC_CTX*> free_;

    EVP_MAC_CTX* take() const {
        {
            std::lock_guard lk(mutex_);
            if (!free_.empty()) {
                EVP_MAC_CTX* c = free_.back();
                free_.pop_back();
                return c;
            }
        }
        return EVP_MAC_CTX_dup(template_);
    }
    void give_back(EVP_MAC_CTX* c) const {
        std::lock_guard lk(mutex_);
        if (free_.size() < 64) {
            free_.push_back(c);
            return;
        }
        EVP_MAC_CTX_free(c);
    }
};

struct key_material {
    algorithm alg;
    std::string kid;
    bool is_private = false;
    // HMAC: the pre-keyed contexts hold the key; coord keeps no copy of the secret.
    std::unique_ptr<hmac_pool> hmac;
    pkey_ptr pkey;
    std::size_t signature_bytes = 0;  // the exact length a valid signature has
};

struct key_access {
    static const key_material& of(const key& k) noexcept { return *k.m_; }
    static key make(std::shared_ptr<const key_material> m) { return key(std::move(m)); }
};

inline key_error key_refused(std::string detail) { return key_error{errc::invalid_key, std::move(detail)}; }

/// ROCA (CVE-2017-15361): moduli from the flawed Infineon generator are
/// congruent, modulo each small prime p below, to a power of 65537. A
/// random modulus passes all these tests with negligible probability.
inline bool roca_fingerprint(const BIGNUM* n) {
    static constexpr unsigned primes[] = {3,  5,  7,  11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61,
                                          67, 71, 73, 79, 83, 89, 97, 101, 103, 107, 109, 113, 127, 131, 137,
                                          139, 149, 151, 157, 163, 167};
    for (const unsigned p : primes) {
        const BN_ULONG r = BN_mod_word(n, p);
        if (r == static_cast<BN_ULONG>(-1)) return false;
        bool in_group = false;
        unsigned g = 1;
        const unsigned base = 65537 % p;
        for (unsigned i = 0; i < p; ++i) {
            if (g == r) {
                in_group = true;
                break;
            }
            g = g * base % p;
        }
        if (!in_group) return false;
    }
    return true;
}

/// Checks that `pkey` suits `alg` and fills the signature size.
inline result<void, key_error> check_pkey(algorithm alg, EVP_PKEY* pkey, key_material& m) {
    const int id = EVP_PKEY_get_base_id(pkey);
    switch (family_of(alg)) {
    case family::hmac: return unexpected(key_refused("HMAC algorithms take a secret, not a public-key key"));
    case family::rsa:
    case family::rsa_pss: {
        if (id != EVP_PKEY_RSA)
            return unexpected(key_refused(std::string(name(alg)) + " needs an RSA key"));
        const int bits = EVP_PKEY_get_bits(pkey);
        if (bits < 2048) return unexpected(key_refused("RSA modulus below 2048 bits"));
        if (bits > 16384) return unexpected(key_refused("RSA modulus above 16384 bits"));
        BIGNUM* e_raw = nullptr;
        BIGNUM* n_raw = nullptr;
        if (EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_RSA_E, &e_raw) != 1 ||
            EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_RSA_N, &n_raw) != 1) {
            BN_free(e_raw);
            return unexpected(key_refused("RSA key without modulus or exponent"));
        }
        bn_ptr e(e_raw), n(n_raw);
        if (!BN_is_odd(e.get()) || BN_is_one(e.get()) || BN_num_bits(e.get()) > 256)
            return unexpected(key_refused("RSA public exponent must be odd, at least 3"));
        if (roca_fingerprint(n.get())) return unexpected(key_refused("RSA modulus has the ROCA fingerprint (CVE-2017-15361)"));
        m.signature_bytes = static_cast<std::size_t>(EVP_PKEY_get_size(pkey));
        return {};
    }
    case family::ecdsa: {
        if (id != EVP_PKEY_EC) return unexpected(key_refused(std::string(name(alg)) + " needs an EC key"));
        char group[64] = {};
        std::size_t len = 0;
        if (EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &len) != 1 ||
            std::string_view(group, len) != ec_group(alg))
            return unexpected(key_refused(std::string(name(alg)) + " needs a key on " + ec_group(alg)));
        std::unique_ptr<EVP_PKEY_CTX, pkey_ctx_free> ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, pkey, nullptr));
        if (!ctx || EVP_PKEY_public_check(ctx.get()) != 1)
            return unexpected(key_refused("EC public key is not a valid point of its curve"));
        m.signature_bytes = 2 * ec_field_bytes(alg);
        return {};
    }
    case family::eddsa:
        if (id != EVP_PKEY_ED25519) return unexpected(key_refused("EdDSA needs an Ed25519 key"));
        m.signature_bytes = 64;
        return {};
    }
    return unexpected(key_refused("unknown algorithm"));
}

inline result<key, key_error> make_pkey_key(algorithm alg, pkey_ptr pkey, bool is_private, std::string kid) {
    auto m = std::make_shared<key_material>();
    m->alg = alg;
    m->kid = std::move(kid);
    m->is_private = is_private;
    if (auto ok = check_pkey(alg, pkey.get(), *m); !ok) return unexpected(ok.error());
    m->pkey = std::move(pkey);
    return key_access::make(std::move(m));
}

/// RSASSA-PSS as JWS fixes it (RFC 7518 3.5): MGF1 with the same hash, salt
/// as long as the hash.
inline bool set_pss(EVP_PKEY_CTX* pctx, algorithm alg) {
    return EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) == 1 &&
           EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) == 1 &&
           EVP_PKEY_CTX_set_rsa_mgf1_md(pctx, digest(alg)) == 1;
}

/// Verifies `sig` over `input` with an asymmetric key.
inline bool verify_pkey(const key_material& k, std::string_view input, const unsigned char* sig, std::size_t sig_len) {
    std::unique_ptr<EVP_MD_CTX, md_ctx_free> ctx(EVP_MD_CTX_new());
    if (!ctx) return false;
    EVP_PKEY_CTX* pctx = nullptr;
    const family f = family_of(k.alg);
    if (EVP_DigestVerifyInit(ctx.get(), &pctx, f == family::eddsa ? nullptr : digest(k.alg), nullptr,
                             k.pkey.get()) != 1)
        return false;
    if (f == family::rsa_pss && !set_pss(pctx, k.alg)) return false;
    const auto* in = reinterpret_cast<const unsigned char*>(input.data());
    if (f != family::ecdsa) return EVP_DigestVerify(ctx.get(), sig, sig_len, in, input.size()) == 1;
    // JWS carries ECDSA as r || s (fixed width); OpenSSL wants DER.
    const std::size_t half = sig_len / 2;
    ECDSA_SIG* es = ECDSA_SIG_new();
    if (!es) return false;
    BIGNUM* r = BN_bin2bn(sig, static_cast<int>(half), nullptr);
    BIGNUM* s = BN_bin2bn(sig + half, static_cast<int>(half), nullptr);
    if (!r || !s || ECDSA_SIG_set0(es, r, s) != 1) {
        BN_free(r);
        BN_free(s);
        ECDSA_SIG_free(es);
        return false;
    }
    unsigned char der[160];
    unsigned char* p = der;
    const int der_len = i2d_ECDSA_SIG(es, nullptr) <= static_cast<int>(sizeof der) ? i2d_ECDSA_SIG(es, &p) : -1;
    ECDSA_SIG_free(es);
    if (der_len <= 0) return false;
    return EVP_DigestVerify(ctx.get(), der, static_cast<std::size_t>(der_len), in, input.size()) == 1;
}

/// The signature of `input` with a signing key, in JWS form.
inline std::string sign_with(const key_material& k, std::string_view input) {
    const auto* in = reinterpret_cast<const unsigned char*>(input.data());
    if (family_of(k.alg) == family::hmac) {
        unsigned char mac[64];
        const std::size_t n = k.hmac->mac(input, mac);
        if (n == 0) throw std::runtime_error("coord: HMAC failed");
        return std::string(reinterpret_cast<const char*>(mac), n);
    }
    std::unique_ptr<EVP_MD_CTX, md_ctx_free> ctx(EVP_MD_CTX_new());
    EVP_PKEY_CTX* pctx = nullptr;
    const family f = family_of(k.alg);
    if (!ctx || EVP_DigestSignInit(ctx.get(), &pctx, f == family::eddsa ? nullptr : digest(k.alg), nullptr,
                                   k.pkey.get()) != 1)
        throw std::runtime_error("coord: signing initialisation failed");
    if (f == family::rsa_pss && !set_pss(pctx, k.alg)) throw std::runtime_error("coord: PSS parameters refused");
    std::size_t len = 0;
    if (EVP_DigestSign(ctx.get(), nullptr, &len, in, input.size()) != 1)
        throw std::runtime_error("coord: signing failed");
    std::string sig(len, '\0');
    if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, in, input.size()) != 1)
        throw std::runtime_error("coord: signing failed");
    sig.resize(len);
    if (f != family::ecdsa) return sig;
    const auto* p = reinterpret_cast<const unsigned char*>(sig.data());
    ECDSA_SIG* es = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(sig.size()));
    if (!es) throw std::runtime_error("coord: ECDSA signature unreadable");
    const std::size_t half = ec_field_bytes(k.alg);
    std::string raw(2 * half, '\0');
    auto* out = reinterpret_cast<unsigned char*>(raw.data());
    const bool ok = BN_bn2binpad(ECDSA_SIG_get0_r(es), out, static_cast<int>(half)) > 0 &&
                    BN_bn2binpad(ECDSA_SIG_get0_s(es), out + half, static_cast<int>(half)) > 0;
    ECDSA_SIG_free(es);
    if (!ok) throw std::runtime_error("coord: ECDSA signature conversion failed");
    return raw;
}

/// Verifies a decoded signature with `k` (length checked first).
inline bool verify_signature(const key_material& k, std::string_view input, const unsigned char* sig,
                             std::size_t sig_len) {
    if (sig_len != k.signature_bytes) return false;
    if (family_of(k.alg) == family::hmac) {
        unsigned char mac[64];
        const std::size_t n = k.hmac->mac(input, mac);
        return n == sig_len && CRYPTO_memcmp(mac, sig, n) == 0;
    }
    return verify_pkey(k, input, sig, sig_len);
}

}  // namespace detail

}  // namespace coord::jwt
