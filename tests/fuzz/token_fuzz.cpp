// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: arbitrary bytes as a token through the whole validation
// path (HS256 and ES256 key sets, every option on), and signing of the bytes
// as claims. It must never crash, leak or hit undefined behaviour, and a
// token that validates must carry a payload the JSON reader accepts.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "coord/jwt.hpp"

namespace {

using namespace coord::jwt;

const key& hmac_key() {
    static const key k = key::hmac(algorithm::hs256, std::string(32, 'f'), "h");
    return k;
}

const key& ec_key() {
    static const key k = *parse_jwk(
        R"({"kty":"EC","crv":"P-256","kid":"e","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"})");
    return k;
}

validation_options strict() {
    validation_options o;
    o.issuer = "iss";
    o.audiences = {"aud"};
    o.type = "JWT";
    o.max_age = std::chrono::hours(1);
    o.understood_critical = {"x"};
    o.max_token_bytes = 4096;
    return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    static const basic_validator<coord::manual_clock> hs(key_set{hmac_key()}, strict(), coord::manual_clock{});
    static const basic_validator<coord::manual_clock> es(key_set{ec_key()}, validation_options{}, coord::manual_clock{});
    (void)hs.validate(input);
    (void)es.validate(input);
    (void)es.verify(input);
    // The same bytes as claims: a signed token of them must validate back
    // unless the claims themselves are refused.
    static const signer sign(hmac_key());
    if (auto token = sign.sign(input)) {
        validation_options o;
        o.required_claims.clear();
        const basic_validator<coord::manual_clock> back(key_set{hmac_key()}, o, coord::manual_clock{});
        auto c = back.validate(*token);
        if (!c && c.error() != coord::errc::token_bad_claim && c.error() != coord::errc::token_not_yet_valid &&
            c.error() != coord::errc::token_expired && c.error() != coord::errc::token_too_large &&
            c.error() != coord::errc::token_bad_json)
            std::abort();
        if (c && c->json() != input) std::abort();
    }
    return 0;
}
