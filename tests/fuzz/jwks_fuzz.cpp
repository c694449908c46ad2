// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: arbitrary bytes as a JWK and a JWKS, and through the
// strict JSON reader beside nlohmann/json: whatever coord's reader accepts,
// nlohmann must accept too (coord is the stricter of the two).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "coord/detail/json.hpp"
#include "coord/jwt.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    (void)coord::jwt::parse_jwk(input);
    (void)coord::jwt::parse_jwks(input);
    (void)coord::jwt::parse_jwks(input, coord::jwt::algorithm::rs256);
    coord::detail::json::reader r(input, 16);
    coord::detail::json::value v;
    if (r.read_value(v) && !nlohmann::json::accept(input)) std::abort();
    return 0;
}
