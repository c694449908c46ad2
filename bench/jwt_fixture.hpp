// SPDX-License-Identifier: Apache-2.0
// bench/jwt_fixture.hpp: the tokens and keys every JWT benchmark measures
// (made once per binary), shared by jwt_bench.cpp and the peer files, which
// live in their own translation units because libjwt's `struct jwt` and
// cpp-jwt's `namespace jwt` cannot meet in one.
#pragma once

#include <openssl/bio.h>
#include <openssl/buffer.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <map>
#include <string>

#include "coord/detail/base64url.hpp"
#include "coord/jwt.hpp"

namespace coord::bench {

using coord::jwt::algorithm;

inline const std::string claims_json =
    R"({"iss":"https://auth.example.com","sub":"user-1234567890","aud":"api.example.com","exp":4102444800,)"
    R"("nbf":1700000000,"iat":1700000000,"jti":"3f2a9c1e-7b4d-4e8a-9f01-23456789abcd","scope":"read write"})";

inline std::string pem_of(EVP_PKEY* k, bool private_key) {
    BIO* bio = BIO_new(BIO_s_mem());
    if (private_key) PEM_write_bio_PrivateKey(bio, k, nullptr, nullptr, 0, nullptr, nullptr);
    else PEM_write_bio_PUBKEY(bio, k);
    BUF_MEM* mem = nullptr;
    BIO_get_mem_ptr(bio, &mem);
    std::string out(mem->data, mem->length);
    BIO_free(bio);
    return out;
}

// One algorithm's material: keys, a token, and the token's parts decoded.
struct fixture {
    algorithm alg;
    std::string secret;                  // HMAC
    std::string private_pem, public_pem;  // others
    EVP_PKEY* public_pkey = nullptr;
    std::string token, signing_input, signature, der_signature;
};

inline fixture make(algorithm alg) {
    fixture f;
    f.alg = alg;
    if (alg == algorithm::hs256) {
        f.secret = std::string(32, 'k');
        f.token = coord::jwt::signer(coord::jwt::key::hmac(alg, f.secret)).sign(claims_json).value();
    } else {
        EVP_PKEY* k = alg == algorithm::es256   ? EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256")
                      : alg == algorithm::eddsa ? EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519")
                                                : EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<std::size_t>(2048));
        f.private_pem = pem_of(k, true);
        f.public_pem = pem_of(k, false);
        EVP_PKEY_free(k);
        BIO* bio = BIO_new_mem_buf(f.public_pem.data(), static_cast<int>(f.public_pem.size()));
        f.public_pkey = PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
        BIO_free(bio);
        f.token = coord::jwt::signer(coord::jwt::key::from_pem(alg, f.private_pem)).sign(claims_json).value();
    }
    const auto dot = f.token.rfind('.');
    f.signing_input = f.token.substr(0, dot);
    coord::detail::base64url_decode(std::string_view(f.token).substr(dot + 1), f.signature);
    f.der_signature = f.signature;
    if (alg == algorithm::es256) {  // OpenSSL's own form, converted outside the measured loop
        ECDSA_SIG* s = ECDSA_SIG_new();
        const auto* raw = reinterpret_cast<const unsigned char*>(f.signature.data());
        ECDSA_SIG_set0(s, BN_bin2bn(raw, 32, nullptr), BN_bin2bn(raw + 32, 32, nullptr));
        unsigned char* der = nullptr;
        const int len = i2d_ECDSA_SIG(s, &der);
        f.der_signature.assign(reinterpret_cast<const char*>(der), static_cast<std::size_t>(len));
        OPENSSL_free(der);
        ECDSA_SIG_free(s);
    }
    return f;
}

inline const fixture& get(algorithm alg) {
    static std::map<algorithm, fixture> all;
    auto it = all.find(alg);
    if (it == all.end()) it = all.emplace(alg, make(alg)).first;
    return it->second;
}

inline coord::jwt::validation_options options() {
    coord::jwt::validation_options o;
    o.issuer = "https://auth.example.com";
    o.audiences = {"api.example.com"};
    return o;
}


}  // namespace coord::bench
