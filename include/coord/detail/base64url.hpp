// SPDX-License-Identifier: Apache-2.0
// coord/detail/base64url.hpp: strict base64url (RFC 4648 section 5, as JWS
// uses it in RFC 7515 section 2). Not for users.
//
// Only the canonical form decodes: the 64-letter URL alphabet, no padding, no
// whitespace, a length that is not 1 modulo 4, and unused trailing bits zero.
// A lenient decoder lets an attacker give one token many spellings (so a
// denylist keyed by the token text misses them) and hides tampering.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace coord::detail {

inline constexpr char base64url_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

inline constexpr std::array<std::int8_t, 256> base64url_values = [] {
    std::array<std::int8_t, 256> t{};
    for (auto& v : t) v = -1;
    for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(base64url_alphabet[i])] = static_cast<std::int8_t>(i);
    return t;
}();

/// The value of a character placed at each of the four positions of a
/// quantum (bits 18, 12, 6, 0), or a bit above 24 when the character is not
/// in the alphabet: decoding four characters is four loads and one test.
inline constexpr std::array<std::array<std::uint32_t, 256>, 4> base64url_placed = [] {
    std::array<std::array<std::uint32_t, 256>, 4> t{};
    for (int pos = 0; pos < 4; ++pos)
        for (int c = 0; c < 256; ++c) {
            const int v = base64url_values[static_cast<std::size_t>(c)];
            t[static_cast<std::size_t>(pos)][static_cast<std::size_t>(c)] =
                v < 0 ? 0x01000000u : static_cast<std::uint32_t>(v) << (18 - 6 * pos);
        }
    return t;
}();

/// The number of bytes `n` base64url characters decode to (n % 4 != 1).
constexpr std::size_t base64url_decoded_size(std::size_t n) noexcept { return n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0); }

/// Decodes canonical base64url into `out` (which must hold
/// base64url_decoded_size(in.size()) bytes). False on any non-canonical input.
inline bool base64url_decode(std::string_view in, unsigned char* out) noexcept {
    const std::size_t n = in.size();
    if (n % 4 == 1) return false;
    const auto* s = reinterpret_cast<const unsigned char*>(in.data());
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const std::uint32_t v = base64url_placed[0][s[i]] | base64url_placed[1][s[i + 1]] |
                                base64url_placed[2][s[i + 2]] | base64url_placed[3][s[i + 3]];
        if (v >> 24) return false;
        *out++ = static_cast<unsigned char>(v >> 16);
        *out++ = static_cast<unsigned char>(v >> 8);
        *out++ = static_cast<unsigned char>(v);
    }
    const std::size_t rest = n - i;
    if (rest == 2) {
        const int a = base64url_values[s[i]], b = base64url_values[s[i + 1]];
        if ((a | b) < 0 || (b & 0x0f) != 0) return false;  // 4 unused bits must be zero
        *out++ = static_cast<unsigned char>(a << 2 | b >> 4);
    } else if (rest == 3) {
        const int a = base64url_values[s[i]], b = base64url_values[s[i + 1]], c = base64url_values[s[i + 2]];
        if ((a | b | c) < 0 || (c & 0x03) != 0) return false;  // 2 unused bits must be zero
        *out++ = static_cast<unsigned char>(a << 2 | b >> 4);
        *out++ = static_cast<unsigned char>((b & 0x0f) << 4 | c >> 2);
    }
    return true;
}

/// Decodes canonical base64url into a string. False on non-canonical input.
inline bool base64url_decode(std::string_view in, std::string& out) {
    if (in.size() % 4 == 1) return false;
    out.resize(base64url_decoded_size(in.size()));
    return base64url_decode(in, reinterpret_cast<unsigned char*>(out.data()));
}

/// Appends the unpadded base64url form of `n` bytes to `out`.
inline void base64url_append(const void* data, std::size_t n, std::string& out) {
    const auto* p = static_cast<const unsigned char*>(data);
    const std::size_t start = out.size();
    out.resize(start + (n / 3) * 4 + (n % 3 ? n % 3 + 1 : 0));
    char* o = out.data() + start;
    std::size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        const std::uint32_t v = static_cast<std::uint32_t>(p[i]) << 16 | static_cast<std::uint32_t>(p[i + 1]) << 8 | p[i + 2];
        *o++ = base64url_alphabet[v >> 18];
        *o++ = base64url_alphabet[(v >> 12) & 63];
        *o++ = base64url_alphabet[(v >> 6) & 63];
        *o++ = base64url_alphabet[v & 63];
    }
    if (n - i == 1) {
        *o++ = base64url_alphabet[p[i] >> 2];
        *o++ = base64url_alphabet[(p[i] & 3) << 4];
    } else if (n - i == 2) {
        *o++ = base64url_alphabet[p[i] >> 2];
        *o++ = base64url_alphabet[(p[i] & 3) << 4 | p[i + 1] >> 4];
        *o++ = base64url_alphabet[(p[i + 1] & 15) << 2];
    }
}

/// The unpadded base64url form of `data`.
inline std::string base64url_encode(std::string_view data) {
    std::string out;
    base64url_append(data.data(), data.size(), out);
    return out;
}

}  // namespace coord::detail
