// SPDX-License-Identifier: Apache-2.0
// coord/detail/text.hpp: the rule every store applies to names (fence keys,
// lease names and owners, segment tags, ledger workers, session users):
// non-empty, at most max_name_size bytes, valid UTF-8 without NUL, so that
// every store, whether it keeps names as bytes (memory, file, Redis) or as
// text (PostgreSQL, whose index keys are limited to about 2.7 KB), gives the
// same answer for the same name. And printable(): any text as one
// unambiguous token of output (for messages and the tools' lines).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace coord::detail {

/// True when `s` is well-formed UTF-8 (RFC 3629: shortest form, no
/// surrogates, at most U+10FFFF) and holds no NUL byte.
constexpr bool valid_name_text(std::string_view s) noexcept {
    std::size_t i = 0;
    const std::size_t n = s.size();
    while (i < n) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x01 && c < 0x80) {
            ++i;
            continue;
        }
        if (c == 0) return false;
        std::size_t len;
        unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c == 0xE0) len = 3, lo = 0xA0;
        else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) len = 3;
        else if (c == 0xED) len = 3, hi = 0x9F;  // no surrogates
        else if (c == 0xF0) len = 4, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3) len = 4;
        else if (c == 0xF4) len = 4, hi = 0x8F;  // at most U+10FFFF
        else return false;
        if (n - i < len) return false;
        const auto c1 = static_cast<unsigned char>(s[i + 1]);
        if (c1 < lo || c1 > hi) return false;
        for (std::size_t k = 2; k < len; ++k) {
            const auto ck = static_cast<unsigned char>(s[i + k]);
            if (ck < 0x80 || ck > 0xBF) return false;
        }
        i += len;
    }
    return true;
}

/// A stored or given string as one unambiguous token of output: a backslash
/// and every byte below 0x20, 0x7f and above are escaped (\\, \n, \t, \r,
/// \xHH), so a value like "x\ntoken=999" cannot forge an output line.
inline std::string printable(std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(s.size());
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else if (c < 0x20 || c >= 0x7f) {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else out += ch;
    }
    return out;
}

}  // namespace coord::detail

#include <stdexcept>
#include <string>

namespace coord {
/// The longest name (fence key, lease name or owner, segment tag, ledger
/// worker, session user) in bytes: one limit that every store enforces.
inline constexpr std::size_t max_name_size = 1024;
}  // namespace coord

namespace coord::detail {

/// Throws std::invalid_argument naming `what` (for example
/// "coord::lease: name") unless `s` is a name: non-empty, at most
/// max_name_size bytes, valid UTF-8 without NUL.
inline void check_name(std::string_view what, std::string_view s) {
    if (s.empty()) throw std::invalid_argument(std::string(what) + " must not be empty");
    if (s.size() > max_name_size)
        throw std::invalid_argument(std::string(what) + " must be at most 1024 bytes, got " + std::to_string(s.size()));
    if (!valid_name_text(s)) throw std::invalid_argument(std::string(what) + " must be valid UTF-8 without NUL");
}

/// `s` when it is valid name text; otherwise a copy with every NUL byte and
/// every byte of an ill-formed sequence (all bytes from 0x80) replaced by
/// '?'. For free text a store must keep as text (a failure reason from an
/// exception's what()), so that a stray byte cannot make the write fail.
inline std::string text_or_replaced(std::string_view s) {
    if (valid_name_text(s)) return std::string(s);
    std::string out(s);
    for (auto& c : out)
        if (c == '\0' || static_cast<unsigned char>(c) >= 0x80) c = '?';
    return out;
}

}  // namespace coord::detail
