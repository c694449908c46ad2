// SPDX-License-Identifier: Apache-2.0
// coord/jwt/algorithm.hpp: the JWS algorithms and their registered names (no OpenSSL).
// Part of coord/jwt.hpp (the umbrella); see its banner for the promises.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

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

}  // namespace coord::jwt
