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
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <string>
#include <string_view>

#include "coord/detail/config.hpp"

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

#ifdef COORD_X86_SIMD
#define COORD_BASE64URL_AVX2 1
/// Decodes the 32 characters at `s` into the 24 bytes at out[0, 24), and
/// writes nothing else. Characters outside the alphabet set bytes of `bad`
/// (the caller tests it once, after all its steps).
__attribute__((target("avx2"), always_inline)) inline void base64url_block_avx2(const unsigned char* s, unsigned char* out,
                                                                                 __m256i& bad) noexcept {
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    // Bytes >= 0x80 are negative as signed and fall in no range.
    const __m256i upper = _mm256_and_si256(_mm256_cmpgt_epi8(c, _mm256_set1_epi8('A' - 1)),
                                           _mm256_cmpgt_epi8(_mm256_set1_epi8('Z' + 1), c));
    const __m256i lower = _mm256_and_si256(_mm256_cmpgt_epi8(c, _mm256_set1_epi8('a' - 1)),
                                           _mm256_cmpgt_epi8(_mm256_set1_epi8('z' + 1), c));
    const __m256i digit = _mm256_and_si256(_mm256_cmpgt_epi8(c, _mm256_set1_epi8('0' - 1)),
                                           _mm256_cmpgt_epi8(_mm256_set1_epi8('9' + 1), c));
    const __m256i dash = _mm256_cmpeq_epi8(c, _mm256_set1_epi8('-'));
    const __m256i under = _mm256_cmpeq_epi8(c, _mm256_set1_epi8('_'));
    const __m256i valid = _mm256_or_si256(_mm256_or_si256(upper, lower), _mm256_or_si256(digit, _mm256_or_si256(dash, under)));
    bad = _mm256_or_si256(bad, _mm256_cmpeq_epi8(valid, _mm256_setzero_si256()));
    __m256i offset = _mm256_and_si256(upper, _mm256_set1_epi8(static_cast<char>(-'A')));
    offset = _mm256_or_si256(offset, _mm256_and_si256(lower, _mm256_set1_epi8(static_cast<char>(26 - 'a'))));
    offset = _mm256_or_si256(offset, _mm256_and_si256(digit, _mm256_set1_epi8(static_cast<char>(52 - '0'))));
    offset = _mm256_or_si256(offset, _mm256_and_si256(dash, _mm256_set1_epi8(static_cast<char>(62 - '-'))));
    offset = _mm256_or_si256(offset, _mm256_and_si256(under, _mm256_set1_epi8(static_cast<char>(63 - '_'))));
    const __m256i values = _mm256_add_epi8(c, offset);
    // 4 x 6 bits -> 24 bits per 32-bit lane, then the 3 bytes of each lane packed.
    const __m256i pairs = _mm256_maddubs_epi16(values, _mm256_set1_epi32(0x01400140));
    const __m256i quads = _mm256_madd_epi16(pairs, _mm256_set1_epi32(0x00011000));
    const __m256i gather = _mm256_setr_epi8(2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1,
                                            2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(quads, gather),
                                                      _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(bytes));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + 16), _mm256_extracti128_si256(bytes, 1));
}

/// Decodes every whole quantum of the first `n` (at least 32) characters
/// with AVX2 into out[0, n / 4 * 3), 32 characters a step; the last step
/// re-decodes the final 32 whole-quantum characters, overlapping the one
/// before. Returns the characters consumed (n rounded down to a multiple of
/// 4), or SIZE_MAX on a character outside the alphabet. Callers check the CPU first.
__attribute__((target("avx2"))) inline std::size_t base64url_decode_avx2(const unsigned char* s, std::size_t n,
                                                                          unsigned char* out) noexcept {
    const std::size_t whole = n / 4 * 4;
    std::size_t i = 0;
    __m256i bad = _mm256_setzero_si256();
    for (; i + 32 <= whole; i += 32) base64url_block_avx2(s + i, out + i / 4 * 3, bad);
    if (whole > i) base64url_block_avx2(s + whole - 32, out + (whole - 32) / 4 * 3, bad);
    return _mm256_testz_si256(bad, bad) ? whole : SIZE_MAX;
}

#endif

/// Decodes canonical base64url into `out` (which must hold
/// base64url_decoded_size(in.size()) bytes). False on any non-canonical input.
inline bool base64url_decode(std::string_view in, unsigned char* out) noexcept {
    const std::size_t n = in.size();
    if (n % 4 == 1) return false;
    const auto* s = reinterpret_cast<const unsigned char*>(in.data());
    std::size_t i = 0;
#ifdef COORD_BASE64URL_AVX2
    if (n >= 32 && cpu_has_avx2()) {
        i = base64url_decode_avx2(s, n, out);
        if (i == SIZE_MAX) return false;
        out += i / 4 * 3;
    }
#endif
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
