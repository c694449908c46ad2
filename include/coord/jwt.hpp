// SPDX-License-Identifier: Apache-2.0
// coord/jwt.hpp: strict JWS/JWT (RFC 7515, 7519) validation and signing with
// keys bound to one algorithm. Target coord::session (needs OpenSSL 3).
//
// A signature proves that a token came from the holder of a key and was not
// changed. It does not hide the claims (anyone can read them), it does not
// revoke a stolen copy (use a revocation store, or short exp), and it is worth
// nothing if the validator can be talked into another algorithm or key. So:
//
//   - A key is made for exactly one algorithm, and its type, curve and size
//     are checked then. A token's alg must equal its key's; `none` has no key
//     and is never accepted; an RSA or EC key can never act as an HMAC secret.
//   - Keys come from the application (PEM, JWK, JWKS), never from the token
//     (jwk, jku, x5u, x5c headers are ignored) and never from the network.
//   - Input is read strictly, in this order, and the first failure is the one
//     reason reported: size, three parts, canonical base64url, header JSON
//     (duplicate names refused), alg and key, crit, signature, then the
//     claims. No claim is read before the signature verifies. No exceptions
//     on this path; refusals carry no secret-derived data.
//
//   auto keys = coord::jwt::key_set{coord::jwt::key::hmac(coord::jwt::algorithm::hs256, secret, "k1")};
//   coord::jwt::validation_options opt;
//   opt.issuer = "https://auth.example.com";
//   opt.audiences = {"api"};
//   coord::jwt::validator v(keys, opt);
//   auto c = v.validate(token);
//   if (!c) return reject(c.error());        // e.g. coord::errc::token_expired
//   use(c->sub, c->json);
//
// What the application must still add: short expiries or a revocation store
// (session.hpp) for stolen tokens, TLS (the claims are readable), and key
// distribution and rotation (key_set swapped with set_keys).
#pragma once

#include "coord/clock.hpp"
#include "coord/detail/base64url.hpp"
#include "coord/detail/config.hpp"
#include "coord/detail/json.hpp"
#include "coord/error.hpp"
#include "coord/result.hpp"
#include "coord/session.hpp"

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

namespace coord::jwt {

/// The JWS algorithms coord implements (RFC 7518 section 3, RFC 8037).
enum class algorithm : std::uint8_t { hs256, hs384, hs512, rs256, rs384, rs512, ps256, ps384, ps512, es256, es384, es512, eddsa };

/// The registered name of `a` ("HS256", ..., "EdDSA").
constexpr std::string_view name(algorithm a) noexcept {
    constexpr std::string_view names[] = {"HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "PS256",
                                          "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"};
    return names[static_cast<int>(a)];
}

/// The algorithm registered as `text` (exact, case-sensitive); none for
/// anything else, "none" included.
constexpr std::optional<algorithm> algorithm_from_name(std::string_view text) noexcept {
    // Every name has five letters: compare them as one number each.
    if (text.size() != 5) return std::nullopt;
    auto pack = [](std::string_view t) {
        std::uint64_t v = 0;
        for (const char c : t) v = v << 8 | static_cast<unsigned char>(c);
        return v;
    };
    const std::uint64_t code = pack(text);
    for (int i = 0; i <= static_cast<int>(algorithm::eddsa); ++i)
        if (pack(name(static_cast<algorithm>(i))) == code) return static_cast<algorithm>(i);
    return std::nullopt;
}

/// A key that cannot be loaded: errc::invalid_key and a sentence naming the
/// field and the rule (never the key material).
struct key_error {
    std::error_code code = errc::invalid_key;
    std::string detail;
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
    static result<key, key_error> try_hmac(algorithm alg, std::string_view secret, std::string kid = {});

    algorithm alg() const noexcept;
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
    void add(key k);
    /// The same checks, reporting instead of throwing.
    result<void, key_error> try_add(key k);

    /// The key for a token's (kid, alg): the key with that kid when the token
    /// names one; else the single key with that alg (when the token names a
    /// kid: the single such key without a kid). Null when there is none, or
    /// several (ambiguous). The caller still checks the key's alg.
    const key* find(std::string_view kid, bool has_kid, algorithm alg) const noexcept;
    const key* find_kid(std::string_view kid) const noexcept;

    std::size_t size() const noexcept { return keys_.size(); }
    bool empty() const noexcept { return keys_.empty(); }
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

/// The protected header of a verified token.
struct header {
    algorithm alg = algorithm::hs256;
    std::optional<std::string> kid;
    std::optional<std::string> typ;
    std::optional<std::string> cty;
};

/// A JWS whose signature verified: its header and decoded payload bytes.
struct verified_jws {
    header hdr;
    std::string payload;
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
    const header& hdr() const noexcept { return hdr_; }
    std::string_view json() const noexcept { return json_.view(); }
    std::optional<std::string_view> iss() const noexcept { return text(iss_); }
    std::optional<std::string_view> sub() const noexcept { return text(sub_); }
    std::optional<std::string_view> jti() const noexcept { return text(jti_); }
    std::optional<std::int64_t> exp() const noexcept { return exp_; }
    std::optional<std::int64_t> nbf() const noexcept { return nbf_; }
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

/// The latest NumericDate accepted: 9999-12-31T23:59:59Z.
inline constexpr std::int64_t max_numeric_date = 253402300799;

/// A revocation store that revokes nothing (the default).
struct no_revocation {
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

    const key& signing_key() const noexcept { return key_; }

private:
    key key_;
};

// ---------------------------------------------------------------------------

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
