// SPDX-License-Identifier: Apache-2.0
// coord/detail/json.hpp: a strict, bounded JSON (RFC 8259) reader for JOSE
// headers, JWT claims and JWKs. Not for users.
//
// Why not nlohmann/json or RapidJSON: bench/jwt_bench.cpp measures both as a
// SAX pass over a typical 250-byte claims set (BM_Json_Nlohmann,
// BM_Json_RapidJson); each costs more than the HMAC-SHA256 that checks the
// token, and an HS256 check must stay within 2x of that HMAC. This reader
// builds nothing: it validates the text and hands back views into it.
// tests/json_test.cpp checks it against nlohmann/json on the same inputs.
//
// Stricter than RFC 8259, as I-JSON (RFC 7493) asks: duplicate member names
// (compared after unescaping) are refused at every depth, so are invalid UTF-8
// and lone surrogates in \u escapes; nesting is capped. Numbers keep their
// text; integers that fit int64 are also given as values.
#pragma once

#include <array>
#include <bit>
#include <charconv>
#include <cstddef>
#include <system_error>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "coord/detail/config.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace coord::detail::json {

enum class kind : std::uint8_t { null, boolean, integer, number, string, array, object };

/// One JSON value, as a view into validated text.
struct value {
    kind type = kind::null;
    /// The value's whole text (a string with its quotes).
    std::string_view raw;
    /// For kind::integer: the value (an integer that fits int64).
    std::int64_t integer = 0;
    /// For kind::boolean.
    bool boolean = false;
    /// For kind::string: the text holds a backslash escape.
    bool escaped = false;

    std::string_view body() const noexcept { return raw.substr(1, raw.size() - 2); }
};

/// Appends the code point `cp` as UTF-8.
inline void append_utf8(std::uint32_t cp, std::string& out) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | cp >> 6);
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | cp >> 12);
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | cp >> 18);
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

inline int hex_digit(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

inline std::uint32_t hex4(const char* p) noexcept {
    return static_cast<std::uint32_t>(hex_digit(p[0]) << 12 | hex_digit(p[1]) << 8 | hex_digit(p[2]) << 4 |
                                      hex_digit(p[3]));
}

/// The unescaped text of a validated string value.
inline std::string unescape(const value& v) {
    const std::string_view b = v.body();
    if (!v.escaped) return std::string(b);
    std::string out;
    out.reserve(b.size());
    for (std::size_t i = 0; i < b.size(); ++i) {
        if (b[i] != '\\') {
            out += b[i];
            continue;
        }
        const char e = b[++i];
        switch (e) {
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
            std::uint32_t cp = hex4(b.data() + i + 1);
            i += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {  // validated: a low surrogate follows
                const std::uint32_t lo = hex4(b.data() + i + 3);
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            }
            append_utf8(cp, out);
            break;
        }
        default: out += e; break;  // " \ /
        }
    }
    return out;
}

/// The first three bytes of a short name as one number, for switching on
/// member names ("exp", "alg", ...) without a string comparison each.
constexpr std::uint32_t code3(std::string_view s) noexcept {
    return s.size() != 3 ? 0
                         : static_cast<std::uint32_t>(static_cast<unsigned char>(s[0])) |
                               static_cast<std::uint32_t>(static_cast<unsigned char>(s[1])) << 8 |
                               static_cast<std::uint32_t>(static_cast<unsigned char>(s[2])) << 16;
}

/// True when the string value equals `s` after unescaping.
inline bool equals(const value& v, std::string_view s) {
    return v.escaped ? unescape(v) == s : v.body() == s;
}

/// Why a text was refused.
enum class failure : std::uint8_t { none, syntax, duplicate_member, too_deep, not_object };

/// The reader. `max_depth` bounds nesting (an object in an object is depth 2).
class reader {
public:
    reader(std::string_view text, std::size_t max_depth) noexcept
        : p_(text.data()), end_(text.data() + text.size()), max_depth_(max_depth) {}

    /// Reads the whole text as one object and calls `on_member(key, value)`
    /// for each top-level member (key and value are kind::string and any
    /// kind). `on_member` returns false to stop; read_object then returns
    /// false with failure() == none.
    template <class OnMember>
    bool read_object(OnMember&& on_member) {
        skip_ws();
        if (p_ == end_ || *p_ != '{') return fail(p_ == end_ ? failure::syntax : failure::not_object);
        if (!object(1, on_member)) return false;
        skip_ws();
        return p_ == end_ || fail(failure::syntax);
    }

    /// Reads the whole text as one array and calls `on_element(value)` for
    /// each element; `on_element` returns false to stop.
    template <class OnElement>
    bool read_array(OnElement&& on_element) {
        skip_ws();
        if (p_ == end_ || *p_ != '[') return fail(failure::syntax);
        if (!array(1, on_element)) return false;
        skip_ws();
        return p_ == end_ || fail(failure::syntax);
    }

    /// Reads the whole text as one value of any kind.
    bool read_value(value& out) {
        skip_ws();
        if (!parse(out, 0)) return false;
        skip_ws();
        return p_ == end_ || fail(failure::syntax);
    }

    failure why() const noexcept { return failure_; }

private:
    const char* p_;
    const char* end_;
    std::size_t max_depth_;
    failure failure_ = failure::none;

    bool fail(failure f) noexcept {
        if (failure_ == failure::none) failure_ = f;
        return false;
    }

    void skip_ws() noexcept {
        while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
    }

    bool literal(std::string_view word) noexcept {
        if (static_cast<std::size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word)
            return fail(failure::syntax);
        p_ += word.size();
        return true;
    }

    bool parse(value& out, std::size_t depth) {
        if (p_ == end_) return fail(failure::syntax);
        const char* start = p_;
        switch (*p_) {
        case '{': {
            auto ignore = [](const value&, const value&) { return true; };
            if (!object(depth + 1, ignore)) return false;
            out.type = kind::object;
            break;
        }
        case '[': {
            auto ignore = [](const value&) { return true; };
            if (!array(depth + 1, ignore)) return false;
            out.type = kind::array;
            break;
        }
        case '"':
            if (!string(out)) return false;
            break;
        case 't':
            if (!literal("true")) return false;
            out.type = kind::boolean;
            out.boolean = true;
            break;
        case 'f':
            if (!literal("false")) return false;
            out.type = kind::boolean;
            out.boolean = false;
            break;
        case 'n':
            if (!literal("null")) return false;
            out.type = kind::null;
            break;
        default:
            if (!number(out)) return false;
            break;
        }
        out.raw = std::string_view(start, static_cast<std::size_t>(p_ - start));
        return true;
    }

    // Strings and numbers, the common members, without a call; the rest
    // (objects, arrays, literals) through parse().
    COORD_ALWAYS_INLINE bool parse_inline(value& out, std::size_t depth) {
        if (p_ != end_ && *p_ == '"') {
            const char* start = p_;
            if (!string(out)) return false;
            out.raw = std::string_view(start, static_cast<std::size_t>(p_ - start));
            return true;
        }
        if (p_ != end_ && (*p_ == '-' || (*p_ >= '0' && *p_ <= '9'))) {
            const char* start = p_;
            if (!number(out)) return false;
            out.raw = std::string_view(start, static_cast<std::size_t>(p_ - start));
            return true;
        }
        return parse(out, depth);
    }

    template <class OnMember>
    bool object(std::size_t depth, OnMember& on_member) {
        if (depth > max_depth_) return fail(failure::too_deep);
        ++p_;  // '{'
        // Member names seen so far: a short list while small, a set past it.
        constexpr std::size_t inline_keys = 16;
        key_ref keys[inline_keys];
        std::size_t count = 0;
        std::optional<std::unordered_set<std::string>> many;
        skip_ws();
        if (p_ != end_ && *p_ == '}') {
            ++p_;
            return true;
        }
        for (;;) {
            skip_ws();
            if (p_ == end_ || *p_ != '"') return fail(failure::syntax);
            value key;
            const char* key_start = p_;
            if (!string(key)) return false;
            key.raw = std::string_view(key_start, static_cast<std::size_t>(p_ - key_start));
            if (count < inline_keys) {
                const key_ref ref = key_ref::of(key, end_);
                for (std::size_t i = 0; i < count; ++i)
                    if ((keys[i].print == ref.print || ref.escaped || keys[i].escaped) && ref.same_as(keys[i]))
                        return fail(failure::duplicate_member);
                keys[count] = ref;
            } else {
                if (count == inline_keys) {
                    many.emplace();
                    for (const auto& k : keys) many->insert(unescape(k.as_value()));
                }
                if (!many->insert(unescape(key)).second) return fail(failure::duplicate_member);
            }
            ++count;
            skip_ws();
            if (p_ == end_ || *p_ != ':') return fail(failure::syntax);
            ++p_;
            skip_ws();
            value v;
            if (!parse_inline(v, depth)) return false;
            if (!on_member(key, v)) return false;
            skip_ws();
            if (p_ == end_) return fail(failure::syntax);
            if (*p_ == ',') {
                ++p_;
                continue;
            }
            if (*p_ == '}') {
                ++p_;
                return true;
            }
            return fail(failure::syntax);
        }
    }

    // A member name seen in an object, with a cheap fingerprint (length and
    // first bytes) so most comparisons end without touching the text. Plain
    // data: an array of them costs nothing to set up.
    struct key_ref {
        const char* data;
        std::size_t size;
        std::uint64_t print;
        bool escaped;

        // The print: the name's length in the top byte, its first (up to)
        // seven bytes below. Equal prints of names up to 7 bytes mean equal names.
        static key_ref of(const value& v, const char* end) noexcept {
            const std::string_view b = v.body();
            const std::size_t n = b.size() < 7 ? b.size() : 7;
            std::uint64_t x = 0;
            if (std::endian::native == std::endian::little && end - b.data() >= 8) {
                std::memcpy(&x, b.data(), 8);
                x &= n == 0 ? 0 : ~std::uint64_t{0} >> (64 - 8 * n);
            } else {
                std::memcpy(&x, b.data(), n);
            }
            return key_ref{b.data(), b.size(), x | static_cast<std::uint64_t>(b.size() & 0xff) << 56, v.escaped};
        }
        value as_value() const {
            value v;
            v.type = kind::string;
            v.raw = std::string_view(data - 1, size + 2);
            v.escaped = escaped;
            return v;
        }
        bool same_as(const key_ref& o) const {
            if (!escaped && !o.escaped) {
                if (print != o.print) return false;
                return size <= 7 || std::string_view(data, size) == std::string_view(o.data, o.size);
            }
            return unescape(as_value()) == unescape(o.as_value());
        }
    };

    template <class OnElement>
    bool array(std::size_t depth, OnElement& on_element) {
        if (depth > max_depth_) return fail(failure::too_deep);
        ++p_;  // '['
        skip_ws();
        if (p_ != end_ && *p_ == ']') {
            ++p_;
            return true;
        }
        for (;;) {
            skip_ws();
            value v;
            if (!parse(v, depth)) return false;
            if (!on_element(v)) return false;
            skip_ws();
            if (p_ == end_) return fail(failure::syntax);
            if (*p_ == ',') {
                ++p_;
                continue;
            }
            if (*p_ == ']') {
                ++p_;
                return true;
            }
            return fail(failure::syntax);
        }
    }

    // Bytes a string can hold as they are (printable ASCII but " and \).
    static constexpr std::array<bool, 256> plain_byte = [] {
        std::array<bool, 256> t{};
        for (int c = 0x20; c < 0x80; ++c) t[static_cast<std::size_t>(c)] = c != '"' && c != '\\';
        return t;
    }();

    // Skips the run of plain bytes at p_: sixteen at a time with SSE2 (every
    // x86-64 has it), one at a time elsewhere and at the end.
    COORD_ALWAYS_INLINE void skip_plain() noexcept {
#if defined(__SSE2__)
        const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
        while (end_ - p_ >= 16) {
            const __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p_));
            // Bytes < 0x20 or >= 0x80, as signed: below 0x20 (0x80.. are negative).
            const __m128i special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(chunk, quote), _mm_cmpeq_epi8(chunk, backslash)),
                                                 _mm_cmplt_epi8(chunk, space));
            const int mask = _mm_movemask_epi8(special);
            if (mask != 0) {
                p_ += __builtin_ctz(static_cast<unsigned>(mask));
                return;
            }
            p_ += 16;
        }
#endif
        while (p_ != end_ && plain_byte[static_cast<unsigned char>(*p_)]) ++p_;
    }

    COORD_ALWAYS_INLINE bool string(value& out) {
        ++p_;  // '"'
        out.type = kind::string;
        out.escaped = false;
        while (p_ != end_) {
            skip_plain();
            while (p_ != end_ && plain_byte[static_cast<unsigned char>(*p_)]) ++p_;
            if (p_ == end_) break;
            const auto c = static_cast<unsigned char>(*p_);
            if (c == '"') {
                ++p_;
                return true;
            }
            if (c < 0x20) return fail(failure::syntax);
            if (c == '\\') {
                out.escaped = true;
                if (!escape()) return false;
            } else if (c < 0x80) {
                ++p_;
            } else if (!utf8()) {
                return false;
            }
        }
        return fail(failure::syntax);
    }

    bool escape() noexcept {
        ++p_;  // backslash
        if (p_ == end_) return fail(failure::syntax);
        switch (*p_) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't': ++p_; return true;
        case 'u': break;
        default: return fail(failure::syntax);
        }
        const std::uint32_t cp = u_escape();
        if (cp == 0xFFFFFFFF) return fail(failure::syntax);
        if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(failure::syntax);  // lone low surrogate
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return fail(failure::syntax);
            ++p_;
            const std::uint32_t lo = u_escape();
            if (lo < 0xDC00 || lo > 0xDFFF) return fail(failure::syntax);
        }
        return true;
    }

    // At 'u': reads four hex digits; 0xFFFFFFFF when they are not.
    std::uint32_t u_escape() noexcept {
        ++p_;
        if (end_ - p_ < 4) return 0xFFFFFFFF;
        for (int i = 0; i < 4; ++i)
            if (hex_digit(p_[i]) < 0) return 0xFFFFFFFF;
        const std::uint32_t cp = hex4(p_);
        p_ += 4;
        return cp;
    }

    // One multi-byte UTF-8 sequence, strictly: shortest form, no surrogates,
    // nothing above U+10FFFF.
    bool utf8() noexcept {
        const auto* s = reinterpret_cast<const unsigned char*>(p_);
        const auto left = end_ - p_;
        const unsigned char c = s[0];
        auto cont = [&](int i) { return i < left && (s[i] & 0xC0) == 0x80; };
        if (c >= 0xC2 && c <= 0xDF) {
            if (!cont(1)) return fail(failure::syntax);
            p_ += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (!cont(1) || !cont(2)) return fail(failure::syntax);
            if (c == 0xE0 && s[1] < 0xA0) return fail(failure::syntax);   // overlong
            if (c == 0xED && s[1] >= 0xA0) return fail(failure::syntax);  // surrogate
            p_ += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (!cont(1) || !cont(2) || !cont(3)) return fail(failure::syntax);
            if (c == 0xF0 && s[1] < 0x90) return fail(failure::syntax);   // overlong
            if (c == 0xF4 && s[1] >= 0x90) return fail(failure::syntax);  // above U+10FFFF
            p_ += 4;
        } else {
            return fail(failure::syntax);
        }
        return true;
    }

    COORD_ALWAYS_INLINE bool number(value& out) noexcept {
        const char* start = p_;
        const bool negative = *p_ == '-';
        if (negative) ++p_;
        if (p_ == end_ || *p_ < '0' || *p_ > '9') return fail(failure::syntax);
        std::uint64_t magnitude = 0;
        bool fits = true;
        if (*p_ == '0') {
            ++p_;
        } else {
            // No leading zeros here, so up to 19 digits cannot pass 2^64:
            // the digit count alone tells whether the magnitude wrapped.
            const char* digits = p_;
            while (p_ != end_ && static_cast<unsigned>(*p_ - '0') < 10) {
                magnitude = magnitude * 10 + static_cast<std::uint64_t>(*p_ - '0');
                ++p_;
            }
            fits = p_ - digits <= 19;
        }
        bool integral = true;
        if (p_ != end_ && *p_ == '.') {
            integral = false;
            ++p_;
            if (p_ == end_ || *p_ < '0' || *p_ > '9') return fail(failure::syntax);
            while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
        }
        if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
            integral = false;
            ++p_;
            if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
            if (p_ == end_ || *p_ < '0' || *p_ > '9') return fail(failure::syntax);
            while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
        }
        constexpr std::uint64_t int64_max = static_cast<std::uint64_t>(INT64_MAX);
        if (integral && fits && (negative ? magnitude <= int64_max + 1 : magnitude <= int64_max)) {
            out.type = kind::integer;
            out.integer = negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
            return true;
        }
        // Numbers must fit an IEEE double (I-JSON): 1e400 is refused,
        // 1e-400 (which rounds to zero) is not.
        double d = 0;
        const auto [end, ec] = std::from_chars(start, p_, d);
        (void)end;
        if (ec == std::errc::result_out_of_range && decimal_exponent(start, p_) > 0) return fail(failure::syntax);
        out.type = kind::number;
        return true;
    }

    // Roughly log10 of a JSON number's magnitude: the sign of it tells an
    // overflow from an underflow.
    static long decimal_exponent(const char* s, const char* e) noexcept {
        if (s != e && *s == '-') ++s;
        long digits = 0;
        bool leading = true;
        const char* p = s;
        for (; p != e && *p >= '0' && *p <= '9'; ++p) {
            if (leading && *p == '0') continue;
            leading = false;
            ++digits;
        }
        long frac_zeros = 0;
        if (p != e && *p == '.') {
            for (++p; p != e && *p >= '0' && *p <= '9'; ++p) {
                if (digits == 0 && *p == '0') ++frac_zeros;
                else if (digits == 0) digits = -1;  // first significant digit after the point
            }
        }
        long exp = 0;
        if (p != e && (*p == 'e' || *p == 'E')) {
            ++p;
            bool neg = false;
            if (p != e && (*p == '+' || *p == '-')) neg = *p++ == '-';
            for (; p != e && *p >= '0' && *p <= '9'; ++p) exp = exp < 100000000 ? exp * 10 + (*p - '0') : exp;
            if (neg) exp = -exp;
        }
        return (digits > 0 ? digits : -frac_zeros) + exp;
    }
};

/// Calls `fn(value)` for each element of a validated array value.
template <class Fn>
void for_each_element(const value& array, Fn&& fn) {
    reader r(array.raw, 64);
    r.read_array([&](const value& v) {
        fn(v);
        return true;
    });
}

/// Appends `s` as a JSON string literal (quotes included).
inline void append_quoted(std::string_view s, std::string& out) {
    out += '"';
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20) {
                static constexpr char hex[] = "0123456789abcdef";
                out += "\\u00";
                out += hex[c >> 4];
                out += hex[c & 15];
            } else {
                out += ch;
            }
        }
    }
    out += '"';
}

}  // namespace coord::detail::json
