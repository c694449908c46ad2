// SPDX-License-Identifier: Apache-2.0
// Tests of coord/jwt.hpp: RFC vectors, key binding, claims on a manual clock,
// the attack suite, key rotation under threads, revocation. The Wycheproof
// suites are in wycheproof_test.cpp.
#include <gtest/gtest.h>

#include <openssl/bio.h>
#include <openssl/buffer.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "coord/detail/base64url.hpp"
#include "coord/jwt.hpp"
#include "coord/storage/memory.hpp"

namespace {

using namespace coord::jwt;
using coord::errc;
using std::chrono::seconds;

std::string b64(std::string_view s) { return coord::detail::base64url_encode(s); }

std::string pem_of(EVP_PKEY* k, bool private_key) {
    BIO* bio = BIO_new(BIO_s_mem());
    if (private_key) PEM_write_bio_PrivateKey(bio, k, nullptr, nullptr, 0, nullptr, nullptr);
    else PEM_write_bio_PUBKEY(bio, k);
    BUF_MEM* mem = nullptr;
    BIO_get_mem_ptr(bio, &mem);
    std::string out(mem->data, mem->length);
    BIO_free(bio);
    return out;
}

// Key pairs made once for the whole binary (RSA generation is slow).
struct key_pair {
    std::string private_pem, public_pem;
};
key_pair generate(const char* type, const char* param, std::size_t bits = 0) {
    EVP_PKEY* k = bits ? EVP_PKEY_Q_keygen(nullptr, nullptr, type, bits)
                  : param ? EVP_PKEY_Q_keygen(nullptr, nullptr, type, param)
                          : EVP_PKEY_Q_keygen(nullptr, nullptr, type);
    key_pair p{pem_of(k, true), pem_of(k, false)};
    EVP_PKEY_free(k);
    return p;
}
const key_pair& rsa2048() { static const key_pair p = generate("RSA", nullptr, 2048); return p; }
const key_pair& rsa1024() { static const key_pair p = generate("RSA", nullptr, 1024); return p; }
const key_pair& p256() { static const key_pair p = generate("EC", "P-256"); return p; }
const key_pair& p384() { static const key_pair p = generate("EC", "P-384"); return p; }
const key_pair& p521() { static const key_pair p = generate("EC", "P-521"); return p; }
const key_pair& ed25519() { static const key_pair p = generate("ED25519", nullptr); return p; }

const std::string secret32(32, 'k');

// The RFC 7515 appendix A payload, exp 1300819380.
const std::string rfc_payload64 =
    "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ";

coord::manual_clock clock_at(std::int64_t unix_seconds) {
    return coord::manual_clock{std::chrono::sys_time<std::chrono::seconds>(seconds(unix_seconds))};
}

using manual_validator = basic_validator<coord::manual_clock>;

validation_options no_required() {
    validation_options o;
    o.required_claims.clear();
    return o;
}

// A token over raw header and payload JSON, HS256-signed with secret32.
std::string hs256_token(std::string_view header_json, std::string_view payload_json, const std::string& secret = secret32) {
    // OpenSSL directly: the header is the test's own, not the signer's.
    const std::string input = b64(header_json) + "." + b64(payload_json);
    unsigned char mac[64];
    std::size_t len = 0;
    EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, secret.data(), secret.size(),
              reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, sizeof mac, &len);
    return input + "." + b64(std::string_view(reinterpret_cast<const char*>(mac), len));
}

manual_validator hs_validator(std::int64_t now = 1'700'000'000, validation_options o = no_required()) {
    return manual_validator(key_set{key::hmac(algorithm::hs256, secret32)}, std::move(o), clock_at(now));
}

// --- RFC vectors --------------------------------------------------------------

TEST(Jwt, Rfc7515A1Hs256) {
    auto k = parse_jwk(R"({"kty":"oct","alg":"HS256","k":"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow"})");
    ASSERT_TRUE(k) << k.error().detail;
    const std::string token = "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9." + rfc_payload64 +
                              ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    manual_validator v(key_set{*k}, validation_options{}, clock_at(1300819379));
    auto c = v.validate(token);
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_EQ(c->iss(), "joe");
    EXPECT_EQ(c->exp(), 1300819380);
    EXPECT_EQ(c->hdr().typ, "JWT");
    EXPECT_TRUE(c->has("http://example.com/is_root"));
    manual_validator late(key_set{*k}, validation_options{}, clock_at(1300819380));
    EXPECT_EQ(late.validate(token).error(), errc::token_expired);  // refused at now == exp
}

TEST(Jwt, Rfc7515A2Rs256) {
    auto k = parse_jwk(R"({"kty":"RSA","alg":"RS256","e":"AQAB","n":"ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ"})");
    ASSERT_TRUE(k) << k.error().detail;
    const std::string token =
        "eyJhbGciOiJSUzI1NiJ9." + rfc_payload64 +
        ".cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw";
    manual_validator v(key_set{*k}, validation_options{}, clock_at(1300819000));
    auto c = v.validate(token);
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_EQ(c->iss(), "joe");
}

TEST(Jwt, Rfc7515A3Es256) {
    auto k = parse_jwk(R"({"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"})");
    ASSERT_TRUE(k) << k.error().detail;
    EXPECT_EQ(k->alg(), algorithm::es256);
    const std::string token = "eyJhbGciOiJFUzI1NiJ9." + rfc_payload64 +
                              ".DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q";
    manual_validator v(key_set{*k}, validation_options{}, clock_at(1300819000));
    auto c = v.validate(token);
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_EQ(c->exp(), 1300819380);
    std::string tampered = token;
    tampered[tampered.size() - 2] = tampered[tampered.size() - 2] == 'U' ? 'V' : 'U';
    EXPECT_EQ(v.validate(tampered).error(), errc::token_bad_signature);
}

TEST(Jwt, Rfc7515A5UnsecuredIsRefused) {
    const std::string token = "eyJhbGciOiJub25lIn0." + rfc_payload64 + ".";
    auto v = hs_validator(1300819000);
    EXPECT_EQ(v.validate(token).error(), errc::token_malformed);  // no signature part
    EXPECT_EQ(v.validate(token + "AAAA").error(), errc::token_alg_refused);
}

TEST(Jwt, Rfc8037Ed25519) {
    auto k = parse_jwk(R"({"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"})");
    ASSERT_TRUE(k) << k.error().detail;
    const std::string token =
        "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc."
        "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg";
    manual_validator v(key_set{*k}, no_required(), clock_at(1700000000));
    auto j = v.verify(token);
    ASSERT_TRUE(j) << j.error().message();
    EXPECT_EQ(j->payload, "Example of Ed25519 signing");
    // Not a JWT: the payload is not a JSON object.
    EXPECT_EQ(v.validate(token).error(), errc::token_bad_json);
}

// --- keys ---------------------------------------------------------------------

TEST(JwtKey, HmacKeyMustBeAsLongAsTheHash) {
    EXPECT_THROW(key::hmac(algorithm::hs256, std::string(31, 'k')), std::invalid_argument);
    EXPECT_THROW(key::hmac(algorithm::hs512, std::string(63, 'k')), std::invalid_argument);
    EXPECT_NO_THROW(key::hmac(algorithm::hs512, std::string(64, 'k')));
    EXPECT_THROW(key::hmac(algorithm::rs256, secret32), std::invalid_argument);
}

TEST(JwtKey, PemKeysAreBoundToTheirAlgorithm) {
    EXPECT_THROW(key::from_pem(algorithm::hs256, rsa2048().public_pem), std::invalid_argument);
    EXPECT_THROW(key::from_pem(algorithm::rs256, rsa1024().public_pem), std::invalid_argument);
    EXPECT_THROW(key::from_pem(algorithm::es256, p384().public_pem), std::invalid_argument);
    EXPECT_THROW(key::from_pem(algorithm::es256, rsa2048().public_pem), std::invalid_argument);
    EXPECT_THROW(key::from_pem(algorithm::eddsa, p256().public_pem), std::invalid_argument);
    EXPECT_THROW(key::from_pem(algorithm::rs256, "-----BEGIN PUBLIC KEY-----\ngarbage\n-----END PUBLIC KEY-----\n"),
                 std::invalid_argument);
    EXPECT_EQ(key::from_pem(algorithm::ps256, rsa2048().public_pem).alg(), algorithm::ps256);
    EXPECT_FALSE(key::from_pem(algorithm::rs256, rsa2048().public_pem).can_sign());
    EXPECT_TRUE(key::from_pem(algorithm::rs256, rsa2048().private_pem).can_sign());
    EXPECT_THROW(signer(key::from_pem(algorithm::rs256, rsa2048().public_pem)), std::invalid_argument);
}

TEST(JwtKey, KeySetRefusesDuplicateKidAndMixedSymmetry) {
    key_set set;
    set.add(key::hmac(algorithm::hs256, secret32, "a"));
    EXPECT_THROW(set.add(key::hmac(algorithm::hs256, std::string(32, 'x'), "a")), std::invalid_argument);
    EXPECT_THROW(set.add(key::from_pem(algorithm::rs256, rsa2048().public_pem, "b")), std::invalid_argument);
    auto jwks = parse_jwks(R"({"keys":[{"kty":"oct","alg":"HS256","kid":"a","k":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
                                        {"kty":"oct","alg":"HS256","kid":"a","k":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE"}]})");
    EXPECT_FALSE(jwks);
}

TEST(JwtKey, JwkRefusals) {
    // Private members in an asymmetric JWK.
    EXPECT_FALSE(parse_jwk(R"({"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0","d":"jpsQnnGQmL-YBIffH1136cspYG6-0iY7X1fCE9-E9LI"})"));
    // Point not on the curve (y changed).
    EXPECT_FALSE(parse_jwk(R"({"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a1"})"));
    // alg that does not fit the curve.
    EXPECT_FALSE(parse_jwk(R"({"kty":"EC","alg":"ES384","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"})"));
    // use enc, key_ops encrypt, unknown kty, oct without alg, RSA without alg.
    EXPECT_FALSE(parse_jwk(R"({"kty":"EC","use":"enc","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"})"));
    EXPECT_FALSE(parse_jwk(R"({"kty":"EC","key_ops":["encrypt"],"crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"})"));
    EXPECT_FALSE(parse_jwk(R"({"kty":"XYZ"})"));
    EXPECT_FALSE(parse_jwk(R"({"kty":"oct","k":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"})"));
    EXPECT_FALSE(parse_jwk(R"({"kty":"RSA","e":"AQAB","n":"ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ"})"));
    // Duplicate members and malformed JSON.
    EXPECT_FALSE(parse_jwk(R"({"kty":"oct","kty":"RSA"})"));
    EXPECT_FALSE(parse_jwk(R"({"kty":"oct",)"));
    EXPECT_FALSE(parse_jwks(R"({"keys":{}})"));
    EXPECT_FALSE(parse_jwks(R"({"other":[]})"));
}

// --- signing round trips -------------------------------------------------------

TEST(JwtSign, EveryAlgorithmRoundTrips) {
    struct one {
        algorithm alg;
        const key_pair* pair;
    };
    const one cases[] = {{algorithm::rs256, &rsa2048()}, {algorithm::rs384, &rsa2048()}, {algorithm::rs512, &rsa2048()},
                         {algorithm::ps256, &rsa2048()}, {algorithm::ps384, &rsa2048()}, {algorithm::ps512, &rsa2048()},
                         {algorithm::es256, &p256()},    {algorithm::es384, &p384()},    {algorithm::es512, &p521()},
                         {algorithm::eddsa, &ed25519()}};
    const std::string claims = R"({"sub":"alice","exp":1700000100})";
    for (const auto& c : cases) {
        SCOPED_TRACE(std::string(name(c.alg)));
        signer s(key::from_pem(c.alg, c.pair->private_pem, "kid-1"));
        auto token = s.sign(claims);
        ASSERT_TRUE(token);
        manual_validator v(key_set{key::from_pem(c.alg, c.pair->public_pem, "kid-1")}, validation_options{},
                           clock_at(1700000000));
        auto got = v.validate(*token);
        ASSERT_TRUE(got) << got.error().message();
        EXPECT_EQ(got->sub(), "alice");
        EXPECT_EQ(got->hdr().alg, c.alg);
        EXPECT_EQ(got->hdr().kid, "kid-1");
    }
    for (const algorithm a : {algorithm::hs256, algorithm::hs384, algorithm::hs512}) {
        const key k = key::hmac(a, std::string(64, 'q'));
        auto token = signer(k).sign(claims);
        ASSERT_TRUE(token);
        manual_validator v(key_set{k}, validation_options{}, clock_at(1700000000));
        EXPECT_TRUE(v.validate(*token)) << name(a);
    }
}

TEST(JwtSign, ClaimsMustBeOneObject) {
    signer s(key::hmac(algorithm::hs256, secret32));
    EXPECT_EQ(s.sign("[1]").error(), errc::token_bad_json);
    EXPECT_EQ(s.sign(R"({"a":1,"a":2})").error(), errc::token_bad_json);
    EXPECT_EQ(s.sign(R"({"a":1)").error(), errc::token_bad_json);
}

// --- claims on a manual clock --------------------------------------------------

TEST(JwtClaims, ExpiryNotBeforeAndLeeway) {
    const std::string token = hs256_token(R"({"alg":"HS256"})", R"({"exp":1000,"nbf":500,"iat":400})");
    auto at = [&](std::int64_t now_ms, seconds leeway = seconds(0)) {
        validation_options o;
        o.leeway = leeway;
        coord::manual_clock c{std::chrono::milliseconds(now_ms)};
        return manual_validator(key_set{key::hmac(algorithm::hs256, secret32)}, o, c).validate(token);
    };
    EXPECT_TRUE(at(999'999));
    EXPECT_EQ(at(1'000'000).error(), errc::token_expired);
    EXPECT_TRUE(at(1'029'999, seconds(30)));
    EXPECT_EQ(at(1'030'000, seconds(30)).error(), errc::token_expired);
    EXPECT_EQ(at(499'999).error(), errc::token_not_yet_valid);
    EXPECT_TRUE(at(500'000));
    EXPECT_TRUE(at(470'000, seconds(30)));
    EXPECT_EQ(at(469'999, seconds(30)).error(), errc::token_not_yet_valid);
}

TEST(JwtClaims, IssuedInTheFutureAndMaxAge) {
    const std::string token = hs256_token(R"({"alg":"HS256"})", R"({"exp":99999,"iat":1000})");
    validation_options o;
    o.max_age = seconds(60);
    auto v = [&](std::int64_t now) { return manual_validator(key_set{key::hmac(algorithm::hs256, secret32)}, o, clock_at(now)); };
    EXPECT_EQ(v(999).validate(token).error(), errc::token_not_yet_valid);
    EXPECT_TRUE(v(1060).validate(token));
    EXPECT_EQ(v(1061).validate(token).error(), errc::token_too_old);
    const std::string no_iat = hs256_token(R"({"alg":"HS256"})", R"({"exp":99999})");
    EXPECT_EQ(v(1000).validate(no_iat).error(), errc::token_missing_claim);
}

TEST(JwtClaims, IssuerAudienceTypeAndRequiredClaims) {
    validation_options o;
    o.issuer = "https://auth.example.com";
    o.audiences = {"api", "admin"};
    o.type = "JWT";
    o.required_claims = {"exp", "sub"};
    auto v = hs_validator(1000, o);
    auto check = [&](std::string_view header, std::string_view payload) { return v.validate(hs256_token(header, payload)); };
    const std::string h = R"({"alg":"HS256","typ":"JWT"})";
    EXPECT_TRUE(check(h, R"({"iss":"https://auth.example.com","aud":"api","sub":"a","exp":2000})"));
    EXPECT_TRUE(check(R"({"alg":"HS256","typ":"application/jwt"})", R"({"iss":"https://auth.example.com","aud":["x","admin"],"sub":"a","exp":2000})"));
    EXPECT_EQ(check(R"({"alg":"HS256","typ":"at+jwt"})", R"({"iss":"https://auth.example.com","aud":"api","sub":"a","exp":2000})").error(), errc::token_wrong_type);
    EXPECT_EQ(check(R"({"alg":"HS256"})", R"({"iss":"https://auth.example.com","aud":"api","sub":"a","exp":2000})").error(), errc::token_wrong_type);
    EXPECT_EQ(check(h, R"({"iss":"https://auth.example.com/","aud":"api","sub":"a","exp":2000})").error(), errc::token_wrong_issuer);
    EXPECT_EQ(check(h, R"({"aud":"api","sub":"a","exp":2000})").error(), errc::token_missing_claim);
    EXPECT_EQ(check(h, R"({"iss":"https://auth.example.com","aud":"api","exp":2000})").error(), errc::token_missing_claim);
    EXPECT_EQ(check(h, R"({"iss":"https://auth.example.com","aud":"api","sub":"a"})").error(), errc::token_missing_claim);
    EXPECT_EQ(check(h, R"({"iss":"https://auth.example.com","sub":"a","exp":2000})").error(), errc::token_missing_claim);
    // The escaped spelling of a claim is the same claim.
    EXPECT_TRUE(check(h, R"({"\u0069ss":"https://auth.example.com","aud":"\u0061pi","sub":"a","exp":2000})"));
    auto c = check(h, R"({"iss":"https://auth.example.com","aud":"api","sub":"a","exp":2000,"role":"admin","n":42})");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->string_claim("role"), "admin");
    EXPECT_EQ(c->integer_claim("n"), 42);
    EXPECT_EQ(c->string_claim("n"), std::nullopt);
    EXPECT_FALSE(c->has("missing"));
    // Escaped text is served unescaped; copies keep their own text.
    auto e = check(h, R"({"iss":"https:\/\/auth.example.com","aud":["a\u0070i","x"],"sub":"\u00e9","jti":"j","exp":2000})");
    ASSERT_TRUE(e) << e.error().message();
    std::optional<claims> copy;
    {
        const claims moved = std::move(*e);
        copy = moved;
    }
    EXPECT_EQ(copy->iss(), "https://auth.example.com");
    EXPECT_EQ(copy->sub(), "\xc3\xa9");
    EXPECT_EQ(copy->jti(), "j");
    EXPECT_EQ(copy->audiences(), (std::vector<std::string>{"api", "x"}));
    EXPECT_TRUE(copy->has_audience("api"));
    EXPECT_FALSE(copy->has_audience("a\\u0070i"));
}

TEST(JwtClaims, OptionsAreRangeChecked) {
    auto make = [](validation_options o) { return manual_validator(key_set{}, std::move(o), clock_at(0)); };
    validation_options o;
    o.leeway = seconds(-1);
    EXPECT_THROW(make(o), std::invalid_argument);
    o = {};
    o.leeway = std::chrono::hours(25);
    EXPECT_THROW(make(o), std::invalid_argument);
    o = {};
    o.max_token_bytes = 10;
    EXPECT_THROW(make(o), std::invalid_argument);
    o = {};
    o.max_json_depth = 0;
    EXPECT_THROW(make(o), std::invalid_argument);
    o = {};
    o.max_age = seconds(0);
    EXPECT_THROW(make(o), std::invalid_argument);
}

// --- the attack suite -----------------------------------------------------------

TEST(JwtAttack, AlgNoneInAnyCasing) {
    auto v = hs_validator();
    for (const char* none : {"none", "None", "NONE", "nOnE", "none "}) {
        SCOPED_TRACE(none);
        const std::string header = std::string(R"({"alg":")") + none + "\"}";
        EXPECT_EQ(v.validate(b64(header) + "." + b64("{}") + ".").error(), errc::token_malformed);
        EXPECT_EQ(v.validate(hs256_token(header, "{}")).error(), errc::token_alg_refused);
    }
    EXPECT_EQ(v.validate(hs256_token(R"({"alg":"hs256"})", "{}")).error(), errc::token_alg_refused);
    EXPECT_EQ(v.validate(hs256_token(R"({"alg":["HS256"]})", "{}")).error(), errc::token_malformed);
    EXPECT_EQ(v.validate(hs256_token(R"({"typ":"JWT"})", "{}")).error(), errc::token_malformed);
}

TEST(JwtAttack, RsaPublicKeyAsHmacSecret) {
    const std::string& pem = rsa2048().public_pem;
    const std::string forged = hs256_token(R"({"alg":"HS256"})", R"({"sub":"admin","exp":9999999999})", pem);
    manual_validator v(key_set{key::from_pem(algorithm::rs256, pem)}, validation_options{}, clock_at(1000));
    EXPECT_EQ(v.validate(forged).error(), errc::token_unknown_key);
    const std::string with_kid = hs256_token(R"({"alg":"HS256","kid":"r"})", R"({"sub":"admin","exp":9999999999})", pem);
    manual_validator v2(key_set{key::from_pem(algorithm::rs256, pem, "r")}, validation_options{}, clock_at(1000));
    EXPECT_EQ(v2.validate(with_kid).error(), errc::token_alg_refused);
}

TEST(JwtAttack, OutOfRangeEcdsaSignatures) {
    const key pub = key::from_pem(algorithm::es256, p256().public_pem);
    manual_validator v(key_set{pub}, no_required(), clock_at(1000));
    const std::string input = b64(R"({"alg":"ES256"})") + "." + b64("{}");
    const std::string n("\xff\xff\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\xbc\xe6\xfa\xad\xa7\x17\x9e\x84\xf3\xb9\xca\xc2\xfc\x63\x25\x51", 32);  // the group order
    ASSERT_EQ(n.size(), 32u);
    const std::string zero(32, '\0'), one = std::string(31, '\0') + "\x01";
    for (const std::string& sig : {zero + zero, zero + one, one + zero, n + one, one + n, n + n,
                                   std::string(64, '\xff'), std::string(63, '\x01'), std::string(65, '\x01'),
                                   std::string(96, '\x01')}) {
        EXPECT_EQ(v.validate(input + "." + b64(sig)).error(), errc::token_bad_signature);
    }
    // A DER-encoded signature is not a JWS ECDSA signature.
    signer s(key::from_pem(algorithm::es256, p256().private_pem));
    const std::string good = s.sign_payload("{}");
    EXPECT_TRUE(v.validate(good));
}

TEST(JwtAttack, TruncatedAndOverlongMacs) {
    auto v = hs_validator();
    const std::string good = hs256_token(R"({"alg":"HS256"})", "{}");
    const std::string input = good.substr(0, good.rfind('.'));
    std::string mac;
    ASSERT_TRUE(coord::detail::base64url_decode(good.substr(good.rfind('.') + 1), mac));
    EXPECT_TRUE(v.validate(good));
    EXPECT_EQ(v.validate(input + "." + b64(mac.substr(0, 31))).error(), errc::token_bad_signature);
    EXPECT_EQ(v.validate(input + "." + b64(mac.substr(0, 16))).error(), errc::token_bad_signature);
    EXPECT_EQ(v.validate(input + "." + b64(mac + std::string(1, '\0'))).error(), errc::token_bad_signature);
    EXPECT_EQ(v.validate(input + "." + b64(std::string(4096, 'x'))).error(), errc::token_bad_signature);
}

// The decoder's SIMD steps (32 characters at a time, the tail re-decoded
// through a scratch block) against a plain bit-by-bit reference: every length
// up to 300, output exactly as long as the decoded size (canaries after it
// stay), and a bad character at every position refused.
TEST(Base64url, EveryLengthMatchesAReferenceAndWritesNothingPastTheOutput) {
    auto reference = [](std::string_view in, std::string& out) {
        out.clear();
        std::uint32_t acc = 0;
        int bits = 0;
        for (const char ch : in) {
            const char* at = std::strchr(coord::detail::base64url_alphabet, ch);
            if (ch == '\0' || at == nullptr) return false;
            acc = acc << 6 | static_cast<std::uint32_t>(at - coord::detail::base64url_alphabet);
            bits += 6;
            if (bits >= 8) {
                bits -= 8;
                out += static_cast<char>(acc >> bits & 0xFF);
            }
        }
        return bits < 6 && (acc & ((1u << bits) - 1)) == 0;  // unused bits zero; no 1-char tail
    };
    std::uint32_t seed = 12345;
    auto next = [&] { return seed = seed * 1103515245u + 12345u; };
    for (std::size_t n = 0; n <= 300; ++n) {
        std::string text;
        for (std::size_t i = 0; i < n; ++i) text += coord::detail::base64url_alphabet[next() >> 26];
        std::string want;
        const bool valid = n % 4 != 1 && reference(text, want);
        std::vector<unsigned char> out(coord::detail::base64url_decoded_size(n) + 40, 0xA5);
        const std::size_t size = n % 4 == 1 ? 0 : coord::detail::base64url_decoded_size(n);
        ASSERT_EQ(coord::detail::base64url_decode(text, out.data()), valid) << n;
        if (valid) {
            EXPECT_EQ(std::string(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(size)), want) << n;
        }
        for (std::size_t i = size; i < out.size(); ++i) ASSERT_EQ(out[i], 0xA5) << "wrote past the output at length " << n;
        if (!valid || n > 120) continue;
        for (std::size_t at = 0; at < n; ++at)
            for (const char bad : {'=', '+', '/', '.', ' ', '\x80', '\xff'}) {
                std::string broken = text;
                broken[at] = bad;
                ASSERT_FALSE(coord::detail::base64url_decode(broken, out.data())) << n << " at " << at;
            }
    }
}

TEST(JwtAttack, NonCanonicalBase64url) {
    auto v = hs_validator();
    const std::string good = hs256_token(R"({"alg":"HS256"})", R"({"a":1})");
    ASSERT_TRUE(v.validate(good));
    const auto d1 = good.find('.'), d2 = good.rfind('.');
    auto with = [&](std::size_t at, std::string_view insert) { return good.substr(0, at) + std::string(insert) + good.substr(at); };
    EXPECT_EQ(v.validate(good + "=").error(), errc::token_bad_encoding);
    EXPECT_EQ(v.validate(with(d1, "=")).error(), errc::token_bad_encoding);
    EXPECT_EQ(v.validate(with(d2, "==")).error(), errc::token_bad_encoding);
    EXPECT_EQ(v.validate(with(1, " ")).error(), errc::token_bad_encoding);
    EXPECT_EQ(v.validate(with(d1 + 1, "\n")).error(), errc::token_bad_encoding);
    std::string plus = good;
    plus[d2 + 3] = '+';
    EXPECT_EQ(v.validate(plus).error(), errc::token_bad_encoding);
    std::string slash = good;
    slash[2] = '/';
    EXPECT_EQ(v.validate(slash).error(), errc::token_bad_encoding);
    // A 32-byte MAC is 43 characters; the last holds 2 unused bits.
    std::string last = good;
    const char c = last.back();
    const auto value = coord::detail::base64url_values[static_cast<unsigned char>(c)];
    last.back() = coord::detail::base64url_alphabet[value ^ 1];
    EXPECT_EQ(v.validate(last).error(), errc::token_bad_encoding);
    auto cut = v.validate(good.substr(0, good.size() - 1));  // 42 chars: 31 bytes, 4 unused bits
    ASSERT_FALSE(cut);
    EXPECT_TRUE(cut.error() == errc::token_bad_encoding || cut.error() == errc::token_bad_signature);
    EXPECT_EQ(v.validate(good + "A").error(), errc::token_bad_signature);  // 44 chars: 33 bytes
}

TEST(JwtAttack, DuplicateMembers) {
    auto v = hs_validator();
    EXPECT_EQ(v.validate(hs256_token(R"({"alg":"HS256","alg":"none"})", "{}")).error(), errc::token_bad_json);
    EXPECT_EQ(v.validate(hs256_token(R"({"alg":"HS256","\u0061lg":"HS256"})", "{}")).error(), errc::token_bad_json);
    EXPECT_EQ(v.validate(hs256_token(R"({"alg":"HS256"})", R"({"sub":"a","sub":"admin"})")).error(), errc::token_bad_json);
    EXPECT_EQ(v.validate(hs256_token(R"({"alg":"HS256"})", R"({"x":{"k":1,"k":2}})")).error(), errc::token_bad_json);
    EXPECT_EQ(v.validate(hs256_token(R"({"alg":"HS256"})", R"({"sub":"a","s\u0075b":"admin"})")).error(), errc::token_bad_json);
}

TEST(JwtAttack, UnknownCritical) {
    auto v = hs_validator();
    EXPECT_EQ(v.validate(hs256_token(R"({"alg":"HS256","crit":["exp"],"exp":1})", "{}")).error(), errc::token_unknown_crit);
    EXPECT_EQ(v.validate(hs256_token(R"({"alg":"HS256","crit":[]})", "{}")).error(), errc::token_unknown_crit);
    EXPECT_EQ(v.validate(hs256_token(R"({"alg":"HS256","crit":"b64"})", "{}")).error(), errc::token_unknown_crit);
    EXPECT_EQ(v.validate(hs256_token(R"({"alg":"HS256","crit":[1]})", "{}")).error(), errc::token_unknown_crit);
    validation_options o = no_required();
    o.understood_critical = {"tenant"};
    auto knows = hs_validator(1700000000, o);
    EXPECT_TRUE(knows.validate(hs256_token(R"({"alg":"HS256","crit":["tenant"],"tenant":"t1"})", "{}")));
    EXPECT_EQ(knows.validate(hs256_token(R"({"alg":"HS256","crit":["tenant","b64"]})", "{}")).error(), errc::token_unknown_crit);
}

TEST(JwtAttack, NumericDatesOfTheWrongKind) {
    auto v = hs_validator(1000);
    for (const char* exp : {R"("9999999999")", "1.9e9", "9999999999.0", "-1", "253402300800",
                            "99999999999999999999", "true", "null", "[9999999999]", "{}"}) {
        SCOPED_TRACE(exp);
        const std::string payload = std::string(R"({"exp":)") + exp + "}";
        EXPECT_EQ(v.validate(hs256_token(R"({"alg":"HS256"})", payload)).error(), errc::token_bad_claim);
        const std::string nbf = std::string(R"({"nbf":)") + exp + "}";
        EXPECT_EQ(v.validate(hs256_token(R"({"alg":"HS256"})", nbf)).error(), errc::token_bad_claim);
    }
    EXPECT_TRUE(v.validate(hs256_token(R"({"alg":"HS256"})", R"({"exp":253402300799})")));
    // A number no double can hold is not JSON coord reads at all.
    EXPECT_EQ(v.validate(hs256_token(R"({"alg":"HS256"})", R"({"exp":1e400})")).error(), errc::token_bad_json);
}

TEST(JwtAttack, AudienceBypasses) {
    validation_options o = no_required();
    o.audiences = {"api"};
    auto v = hs_validator(1000, o);
    auto aud = [&](std::string_view a) {
        return v.validate(hs256_token(R"({"alg":"HS256"})", std::string(R"({"aud":)") + std::string(a) + "}"));
    };
    EXPECT_TRUE(aud(R"("api")"));
    EXPECT_TRUE(aud(R"(["other","api"])"));
    EXPECT_EQ(aud(R"("api.evil")").error(), errc::token_wrong_audience);
    EXPECT_EQ(aud(R"("API")").error(), errc::token_wrong_audience);
    EXPECT_EQ(aud(R"("ap")").error(), errc::token_wrong_audience);
    EXPECT_EQ(aud(R"("api\u0000")").error(), errc::token_wrong_audience);
    EXPECT_EQ(aud(R"(["other"])").error(), errc::token_wrong_audience);
    EXPECT_EQ(aud(R"([])").error(), errc::token_bad_claim);
    EXPECT_EQ(aud(R"([["api"]])").error(), errc::token_bad_claim);
    EXPECT_EQ(aud(R"(["api",1])").error(), errc::token_bad_claim);
    EXPECT_EQ(aud(R"({"0":"api"})").error(), errc::token_bad_claim);
    EXPECT_EQ(aud("null").error(), errc::token_bad_claim);
}

TEST(JwtAttack, OversizedTokensAndManyDots) {
    auto v = hs_validator();
    EXPECT_EQ(v.validate(std::string(8193, 'a')).error(), errc::token_too_large);
    std::string dots;
    for (int i = 0; i < 4000; ++i) dots += "a.";
    EXPECT_EQ(v.validate(dots).error(), errc::token_malformed);
    EXPECT_EQ(v.validate(dots + dots + dots).error(), errc::token_too_large);
    EXPECT_EQ(v.validate("").error(), errc::token_malformed);
    EXPECT_EQ(v.validate("..").error(), errc::token_malformed);
    EXPECT_EQ(v.validate("a.b").error(), errc::token_malformed);
    EXPECT_EQ(v.validate("a.b.c.d").error(), errc::token_malformed);
    EXPECT_EQ(v.validate("a.b.c.").error(), errc::token_malformed);
    // Deep nesting is refused, not recursed into without bound.
    std::string deep = R"({"alg":"HS256","x":)" + std::string(100, '[') + std::string(100, ']') + "}";
    EXPECT_EQ(v.validate(hs256_token(deep, "{}")).error(), errc::token_bad_json);
}

TEST(JwtAttack, KidWithPathOrSqlText) {
    key_set set{key::hmac(algorithm::hs256, secret32, "real")};
    manual_validator v(set, no_required(), clock_at(1000));
    for (const char* kid : {"../../../../etc/passwd", "' OR '1'='1", "real'; DROP TABLE keys; --", "real ", "REAL", "/dev/zero"}) {
        std::string header = R"({"alg":"HS256","kid":)";
        coord::detail::json::append_quoted(kid, header);
        header += "}";
        EXPECT_EQ(v.validate(hs256_token(header, "{}")).error(), errc::token_unknown_key) << kid;
    }
    EXPECT_TRUE(v.validate(hs256_token(R"({"alg":"HS256","kid":"real"})", "{}")));
    EXPECT_EQ(v.validate(hs256_token(R"({"alg":"HS256","kid":5})", "{}")).error(), errc::token_malformed);
}

TEST(JwtAttack, MalformedJson) {
    auto v = hs_validator();
    EXPECT_EQ(v.validate(hs256_token("[]", "{}")).error(), errc::token_bad_json);
    EXPECT_EQ(v.validate(hs256_token(R"("HS256")", "{}")).error(), errc::token_bad_json);
    EXPECT_TRUE(v.validate(hs256_token(" {\"alg\":\"HS256\"}\n", "{}")));  // whitespace around is JSON
    EXPECT_EQ(v.validate(hs256_token(R"({"alg":"HS256"}x)", "{}")).error(), errc::token_bad_json);
    EXPECT_EQ(v.validate(hs256_token(R"({"alg":"HS256"})", "")).error(), errc::token_bad_json);
    EXPECT_EQ(v.validate(hs256_token(R"({"alg":"HS256"})", "{\"a\":\"\xff\"}")).error(), errc::token_bad_json);
    EXPECT_EQ(v.validate(hs256_token(R"({"alg":"HS256"})", R"({"a":"\ud800"})")).error(), errc::token_bad_json);
    EXPECT_EQ(v.validate(hs256_token(R"({"alg":"HS256"})", R"({"a":01})")).error(), errc::token_bad_json);
    EXPECT_TRUE(v.validate(hs256_token(R"({"alg":"HS256"})", R"({"a":"\ud83d\ude00 \u00e9"})")));
}

TEST(JwtAttack, SignatureIsCheckedBeforeClaims) {
    // A token with bad claims and a bad signature reports the signature.
    auto v = hs_validator(1000);
    std::string t = hs256_token(R"({"alg":"HS256"})", R"({"exp":"soon"})");
    t[t.size() - 5] = t[t.size() - 5] == 'A' ? 'B' : 'A';
    EXPECT_EQ(v.validate(t).error(), errc::token_bad_signature);
}

// --- key rotation and threads ----------------------------------------------------

TEST(JwtKeySet, RotationIsAtomicUnderReaders) {
    const key old_key = key::hmac(algorithm::hs256, std::string(32, 'o'), "old");
    const key new_key = key::hmac(algorithm::hs256, std::string(32, 'n'), "new");
    const std::string old_token = signer(old_key).sign(R"({"exp":99999})").value();
    const std::string new_token = signer(new_key).sign(R"({"exp":99999})").value();
    manual_validator v(key_set{old_key}, validation_options{}, clock_at(1000));
    std::atomic<bool> stop{false};
    std::atomic<int> bad{0};
    std::vector<std::thread> readers;
    for (int i = 0; i < 3; ++i)
        readers.emplace_back([&] {
            while (!stop.load()) {
                auto a = v.validate(old_token), b = v.validate(new_token);
                // Each token either verifies or is refused for want of its key.
                if (!a && a.error() != errc::token_unknown_key) ++bad;
                if (!b && b.error() != errc::token_unknown_key) ++bad;
            }
        });
    for (int i = 0; i < 2000; ++i) {
        v.set_keys(i % 2 ? key_set{old_key} : key_set{old_key, new_key});
        if (i % 2 == 0) {
            EXPECT_TRUE(v.validate(new_token));
        }
    }
    v.set_keys(key_set{new_key});
    stop = true;
    for (auto& t : readers) t.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_TRUE(v.validate(new_token));
    EXPECT_EQ(v.validate(old_token).error(), errc::token_unknown_key);
}

// A thread remembers the last header that passed under a key set. That
// memory must never outlive the set or cross to another validator: same
// header text, different validators, swapped sets, a validator replaced by
// another (which may take the same address), a header refused before.
TEST(JwtKeySet, RememberedHeadersFollowTheValidatorAndItsKeySet) {
    const std::string a_secret(32, 'a'), b_secret(32, 'b');
    const std::string header = R"({"alg":"HS256","typ":"JWT","kid":"k1"})";
    const std::string by_a = hs256_token(header, "{}", a_secret), by_b = hs256_token(header, "{}", b_secret);
    ASSERT_EQ(by_a.substr(0, by_a.find('.')), by_b.substr(0, by_b.find('.')));  // byte-identical headers
    manual_validator va(key_set{key::hmac(algorithm::hs256, a_secret, "k1")}, no_required(), clock_at(0));
    manual_validator vb(key_set{key::hmac(algorithm::hs256, b_secret, "k1")}, no_required(), clock_at(0));
    for (int round = 0; round < 3; ++round) {  // alternating validators in one thread
        EXPECT_TRUE(va.validate(by_a));
        EXPECT_EQ(va.validate(by_b).error(), errc::token_bad_signature);
        EXPECT_TRUE(vb.validate(by_b));
        EXPECT_EQ(vb.validate(by_a).error(), errc::token_bad_signature);
    }
    auto remembered = va.validate(by_a);
    ASSERT_TRUE(remembered);
    EXPECT_EQ(remembered->hdr().kid, "k1");
    EXPECT_EQ(remembered->hdr().typ, "JWT");
    EXPECT_EQ(remembered->hdr().alg, algorithm::hs256);

    // A swap: the header's key is now b's, then no key has kid k1.
    va.set_keys(key_set{key::hmac(algorithm::hs256, b_secret, "k1")});
    EXPECT_EQ(va.validate(by_a).error(), errc::token_bad_signature);
    EXPECT_TRUE(va.validate(by_b));
    va.set_keys(key_set{key::hmac(algorithm::hs256, a_secret, "k2")});
    EXPECT_EQ(va.validate(by_a).error(), errc::token_unknown_key);
    // A refused header is not remembered: once k1 exists again it passes.
    va.set_keys(key_set{key::hmac(algorithm::hs256, a_secret, "k1")});
    EXPECT_TRUE(va.validate(by_a));

    // Validators made and dropped in turn, each with the other secret.
    for (int i = 0; i < 6; ++i) {
        const bool a = i % 2 == 0;
        manual_validator v(key_set{key::hmac(algorithm::hs256, a ? a_secret : b_secret, "k1")}, no_required(), clock_at(0));
        EXPECT_EQ(static_cast<bool>(v.validate(by_a)), a) << i;
        EXPECT_EQ(static_cast<bool>(v.validate(by_b)), !a) << i;
    }
    // Other options, same keys: crit understood by one validator only.
    const std::string crit_header = R"({"alg":"HS256","kid":"k1","crit":["x"],"x":1})";
    const std::string with_crit = hs256_token(crit_header, "{}", a_secret);
    validation_options understands = no_required();
    understands.understood_critical = {"x"};
    manual_validator vx(key_set{key::hmac(algorithm::hs256, a_secret, "k1")}, understands, clock_at(0));
    EXPECT_TRUE(vx.validate(with_crit));
    EXPECT_EQ(va.validate(with_crit).error(), errc::token_unknown_crit);
    EXPECT_TRUE(vx.validate(with_crit));
}

TEST(JwtKeySet, WithoutKidTheSingleKeyOfTheAlgorithm) {
    const key a = key::hmac(algorithm::hs256, std::string(32, 'a'), "a");
    const key b = key::hmac(algorithm::hs256, std::string(32, 'b'), "b");
    const key c = key::hmac(algorithm::hs384, std::string(48, 'c'), "c");
    const std::string token = hs256_token(R"({"alg":"HS256"})", "{}", std::string(32, 'a'));
    EXPECT_TRUE(manual_validator(key_set{a, c}, no_required(), clock_at(0)).validate(token));
    // Two HS256 keys and no kid: ambiguous, refused rather than tried in turn.
    EXPECT_EQ(manual_validator(key_set{a, b}, no_required(), clock_at(0)).validate(token).error(), errc::token_unknown_key);
    // A kid no key has: only a key without a kid may stand in.
    const std::string with_kid = hs256_token(R"({"alg":"HS256","kid":"zz"})", "{}", std::string(32, 'a'));
    EXPECT_EQ(manual_validator(key_set{a, c}, no_required(), clock_at(0)).validate(with_kid).error(), errc::token_unknown_key);
    const key plain = key::hmac(algorithm::hs256, std::string(32, 'a'));
    EXPECT_TRUE(manual_validator(key_set{plain, c}, no_required(), clock_at(0)).validate(with_kid));
}

// --- revocation -----------------------------------------------------------------

TEST(JwtRevocation, DeniedJtiAndSubjectNotBefore) {
    coord::memory_store store;
    basic_validator<coord::manual_clock, coord::memory_store> v(key_set{key::hmac(algorithm::hs256, secret32)},
                                                                 validation_options{}, clock_at(2000), &store);
    const std::string t1 = hs256_token(R"({"alg":"HS256"})", R"({"jti":"t1","sub":"alice","iat":1000,"exp":5000})");
    const std::string t2 = hs256_token(R"({"alg":"HS256"})", R"({"jti":"t2","sub":"alice","iat":1900,"exp":5000})");
    const std::string t3 = hs256_token(R"({"alg":"HS256"})", R"({"jti":"t3","sub":"bob","exp":5000})");
    EXPECT_TRUE(v.validate(t1));
    ASSERT_TRUE(store.revoke_token("t1", 5000));
    EXPECT_EQ(v.validate(t1).error(), errc::token_revoked);
    EXPECT_TRUE(v.validate(t2));
    ASSERT_TRUE(store.revoke_subject("alice", 1950));  // log alice out everywhere
    EXPECT_EQ(v.validate(t2).error(), errc::token_revoked);
    EXPECT_TRUE(v.validate(t3));
    ASSERT_TRUE(store.revoke_subject("bob", 10));  // t3 has no iat: it cannot prove it is newer
    EXPECT_EQ(v.validate(t3).error(), errc::token_revoked);
    ASSERT_TRUE(store.revoke_subject("alice", 5));  // never moves back
    EXPECT_EQ(v.validate(t2).error(), errc::token_revoked);
}

}  // namespace
