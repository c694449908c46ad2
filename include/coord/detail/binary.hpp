// SPDX-License-Identifier: Apache-2.0
// coord/detail/binary.hpp: the little-endian encoding and CRC-32C behind
// coord's state files. Not for users.
//
// Every read is bounds-checked: a reader that runs past its input turns bad
// instead of reading garbage, so a cut or damaged file becomes an error.
#pragma once

#include <array>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

namespace coord::detail {

/// CRC-32C (Castagnoli), the checksum of state files.
inline std::uint32_t crc32c(const void* data, std::size_t n, std::uint32_t crc = 0) noexcept {
    static constexpr auto table = [] {
        std::array<std::uint32_t, 256> t{};
        for (std::uint32_t i = 0; i < 256; ++i) {
            std::uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    const auto* p = static_cast<const unsigned char*>(data);
    crc = ~crc;
    for (std::size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}

/// Appends fixed-width little-endian integers and length-prefixed strings.
class byte_writer {
public:
    void u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
    void u32(std::uint32_t v) { put(v, 4); }
    void u64(std::uint64_t v) { put(v, 8); }
    void i64(std::int64_t v) { put(static_cast<std::uint64_t>(v), 8); }
    void boolean(bool v) { u8(v ? 1 : 0); }
    /// A length-prefixed string; one longer than max_string() is not
    /// written and marks the writer as overflowed.
    void str(std::string_view s) {
        if (s.size() > max_string_) {
            overflowed_ = true;
            u32(0);
            return;
        }
        u32(static_cast<std::uint32_t>(s.size()));
        out_.append(s);
    }
    void set_max_string(std::size_t n) noexcept { max_string_ = std::min<std::size_t>(n, 0xFFFFFFFFu); }
    std::size_t max_string() const noexcept { return max_string_; }
    /// True when a string was over max_string(): the bytes are not a valid encoding.
    bool overflowed() const noexcept { return overflowed_; }
    void raw(std::string_view s) { out_.append(s); }
    /// Overwrites 4 bytes at `pos` (for a length known only later).
    void patch_u32(std::size_t pos, std::uint32_t v) {
        for (int i = 0; i < 4; ++i) out_[pos + i] = static_cast<char>((v >> (8 * i)) & 0xFFu);
    }
    std::size_t size() const noexcept { return out_.size(); }
    const std::string& bytes() const noexcept { return out_; }
    std::string take() noexcept { return std::move(out_); }

private:
    void put(std::uint64_t v, int n) {
        for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
    }
    std::string out_;
    std::size_t max_string_ = 0xFFFFFFFFu;
    bool overflowed_ = false;
};

/// Reads what byte_writer wrote. Once a read runs past the end, ok() is
/// false and every later read returns zero values.
class byte_reader {
public:
    explicit byte_reader(std::string_view in) noexcept : in_(in) {}

    std::uint8_t u8() noexcept { return static_cast<std::uint8_t>(get(1)); }
    std::uint32_t u32() noexcept { return static_cast<std::uint32_t>(get(4)); }
    std::uint64_t u64() noexcept { return get(8); }
    std::int64_t i64() noexcept { return static_cast<std::int64_t>(get(8)); }
    bool boolean() noexcept {
        const auto v = u8();
        if (v > 1) ok_ = false;
        return v == 1;
    }
    std::string str() {
        const auto n = u32();
        if (!take(n)) return {};
        return std::string(in_.substr(pos_ - n, n));
    }
    /// The next n bytes, or an empty view (and !ok()) when fewer remain.
    std::string_view bytes(std::size_t n) noexcept {
        if (!take(n)) return {};
        return in_.substr(pos_ - n, n);
    }
    bool ok() const noexcept { return ok_; }
    bool at_end() const noexcept { return pos_ == in_.size(); }
    void fail() noexcept { ok_ = false; }

private:
    bool take(std::size_t n) noexcept {
        if (!ok_ || in_.size() - pos_ < n) {
            ok_ = false;
            return false;
        }
        pos_ += n;
        return true;
    }
    std::uint64_t get(int n) noexcept {
        if (!take(static_cast<std::size_t>(n))) return 0;
        std::uint64_t v = 0;
        for (int i = 0; i < n; ++i)
            v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in_[pos_ - n + i])) << (8 * i);
        return v;
    }
    std::string_view in_;
    std::size_t pos_ = 0;
    bool ok_ = true;
};

}  // namespace coord::detail
