// SPDX-License-Identifier: Apache-2.0
// coord/random.hpp: randomness sources for ID generators: os_random, the
// operating system's CSPRNG made cheap per call, and the random_source concept
// through which tests inject a deterministic one.
//
// The kernel's getrandom() costs about 20 ns per 8 bytes on the machines we
// measured, as much as a clock read: too much for a UUID on a hot path.
// os_random keeps, per thread, a ChaCha12 generator keyed from getrandom()
// (Bernstein's fast-key-erasure design, as arc4random on the BSDs; 12 rounds
// as Rust's StdRng: the best known attack reaches 7): each refill computes
// 16 ChaCha blocks (eight at a time with AVX2 where the CPU has it, four
// otherwise), uses the first 32 bytes as the next key
// (the old key is gone, so a later compromise cannot reveal earlier output)
// and hands out the rest. It takes a fresh key from getrandom() after every
// 1 MiB and in a child after fork(), so a child never repeats its parent's
// bytes.
//
//   coord::os_random rng;
//   std::uint64_t r = rng.next_u64();
#pragma once

#include <pthread.h>
#include <sys/random.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <system_error>

#include "coord/detail/config.hpp"
#ifdef COORD_X86_SIMD
#include <immintrin.h>
#endif

namespace coord {

/// A source of uniformly random 64-bit values. Sources used by a generator
/// shared between threads must be safe to call from any thread.
template <class R>
concept random_source = requires(R& r) {
    { r.next_u64() } -> std::same_as<std::uint64_t>;
};

namespace detail {

/// The ChaCha20 block function (RFC 8439 section 2.3): 64 bytes of key stream
/// for a 256-bit key, a 32-bit block counter and a 96-bit nonce.
inline void chacha20_block(const std::uint32_t key[8], std::uint32_t counter, const std::uint32_t nonce[3],
                           std::uint8_t out[64]) noexcept {
    std::uint32_t s[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u, key[0], key[1], key[2], key[3],
                           key[4],      key[5],      key[6],      key[7],      counter, nonce[0], nonce[1], nonce[2]};
    std::uint32_t x[16];
    std::memcpy(x, s, sizeof x);
    auto rotl = [](std::uint32_t v, int n) { return (v << n) | (v >> (32 - n)); };
    auto qr = [&](int a, int b, int c, int d) {
        x[a] += x[b]; x[d] = rotl(x[d] ^ x[a], 16);
        x[c] += x[d]; x[b] = rotl(x[b] ^ x[c], 12);
        x[a] += x[b]; x[d] = rotl(x[d] ^ x[a], 8);
        x[c] += x[d]; x[b] = rotl(x[b] ^ x[c], 7);
    };
    for (int i = 0; i < 10; ++i) {
        qr(0, 4, 8, 12); qr(1, 5, 9, 13); qr(2, 6, 10, 14); qr(3, 7, 11, 15);
        qr(0, 5, 10, 15); qr(1, 6, 11, 12); qr(2, 7, 8, 13); qr(3, 4, 9, 14);
    }
    for (int i = 0; i < 16; ++i) {
        const std::uint32_t v = x[i] + s[i];
        out[4 * i + 0] = static_cast<std::uint8_t>(v);
        out[4 * i + 1] = static_cast<std::uint8_t>(v >> 8);
        out[4 * i + 2] = static_cast<std::uint8_t>(v >> 16);
        out[4 * i + 3] = static_cast<std::uint8_t>(v >> 24);
    }
}

/// Four consecutive ChaCha blocks (counters counter..counter+3) into
/// out[256]: with 20 rounds the same bytes as four chacha20_block calls; one
/// block per lane of a 4 x 32-bit vector (SSE2 on x86-64, NEON on ARM).
template <int Rounds = 20>
void chacha_blocks4(const std::uint32_t key[8], std::uint32_t counter, const std::uint32_t nonce[3],
                    std::uint8_t out[256]) noexcept {
    static_assert(Rounds % 2 == 0 && Rounds >= 8);
    using v4 = std::uint32_t __attribute__((vector_size(16)));
    auto splat = [](std::uint32_t v) { return v4{v, v, v, v}; };
    const v4 s[16] = {splat(0x61707865u), splat(0x3320646eu), splat(0x79622d32u), splat(0x6b206574u),
                      splat(key[0]),      splat(key[1]),      splat(key[2]),      splat(key[3]),
                      splat(key[4]),      splat(key[5]),      splat(key[6]),      splat(key[7]),
                      v4{counter, counter + 1, counter + 2, counter + 3},
                      splat(nonce[0]),    splat(nonce[1]),    splat(nonce[2])};
    v4 x[16];
    for (int i = 0; i < 16; ++i) x[i] = s[i];
    auto qr = [&](int a, int b, int c, int d) {
        x[a] += x[b]; x[d] ^= x[a]; x[d] = (x[d] << 16) | (x[d] >> 16);
        x[c] += x[d]; x[b] ^= x[c]; x[b] = (x[b] << 12) | (x[b] >> 20);
        x[a] += x[b]; x[d] ^= x[a]; x[d] = (x[d] << 8) | (x[d] >> 24);
        x[c] += x[d]; x[b] ^= x[c]; x[b] = (x[b] << 7) | (x[b] >> 25);
    };
    for (int i = 0; i < Rounds / 2; ++i) {
        qr(0, 4, 8, 12); qr(1, 5, 9, 13); qr(2, 6, 10, 14); qr(3, 7, 11, 15);
        qr(0, 5, 10, 15); qr(1, 6, 11, 12); qr(2, 7, 8, 13); qr(3, 4, 9, 14);
    }
    for (int i = 0; i < 16; ++i) x[i] += s[i];
    for (int l = 0; l < 4; ++l)
        for (int i = 0; i < 16; ++i) {
            const std::uint32_t v = x[i][l];
            std::uint8_t* o = out + 64 * l + 4 * i;
            o[0] = static_cast<std::uint8_t>(v);
            o[1] = static_cast<std::uint8_t>(v >> 8);
            o[2] = static_cast<std::uint8_t>(v >> 16);
            o[3] = static_cast<std::uint8_t>(v >> 24);
        }
}

#ifdef COORD_X86_SIMD
/// One ChaCha quarter round on eight blocks at once (AVX2).
__attribute__((target("avx2"), always_inline)) inline void chacha_qr8(__m256i& a, __m256i& b, __m256i& c, __m256i& d,
                                                                       __m256i rot16, __m256i rot8) noexcept {
    a = _mm256_add_epi32(a, b);
    d = _mm256_shuffle_epi8(_mm256_xor_si256(d, a), rot16);
    c = _mm256_add_epi32(c, d);
    b = _mm256_xor_si256(b, c);
    b = _mm256_or_si256(_mm256_slli_epi32(b, 12), _mm256_srli_epi32(b, 20));
    a = _mm256_add_epi32(a, b);
    d = _mm256_shuffle_epi8(_mm256_xor_si256(d, a), rot8);
    c = _mm256_add_epi32(c, d);
    b = _mm256_xor_si256(b, c);
    b = _mm256_or_si256(_mm256_slli_epi32(b, 7), _mm256_srli_epi32(b, 25));
}

/// Eight consecutive ChaCha blocks (counters counter..counter+7) into
/// out[512], one block per lane of eight 32-bit AVX2 lanes: the same bytes
/// as chacha_blocks4 twice. Callers check detail::cpu_has_avx2() first.
template <int Rounds = 20>
__attribute__((target("avx2"))) void chacha_blocks8_avx2(const std::uint32_t key[8], std::uint32_t counter,
                                                         const std::uint32_t nonce[3], std::uint8_t out[512]) noexcept {
    static_assert(Rounds % 2 == 0 && Rounds >= 8);
    auto w = [](std::uint32_t v) { return static_cast<int>(v); };
    __m256i s[16] = {_mm256_set1_epi32(0x61707865),
                     _mm256_set1_epi32(0x3320646e),
                     _mm256_set1_epi32(0x79622d32),
                     _mm256_set1_epi32(0x6b206574),
                     _mm256_set1_epi32(w(key[0])),
                     _mm256_set1_epi32(w(key[1])),
                     _mm256_set1_epi32(w(key[2])),
                     _mm256_set1_epi32(w(key[3])),
                     _mm256_set1_epi32(w(key[4])),
                     _mm256_set1_epi32(w(key[5])),
                     _mm256_set1_epi32(w(key[6])),
                     _mm256_set1_epi32(w(key[7])),
                     _mm256_add_epi32(_mm256_set1_epi32(w(counter)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
                     _mm256_set1_epi32(w(nonce[0])),
                     _mm256_set1_epi32(w(nonce[1])),
                     _mm256_set1_epi32(w(nonce[2]))};
    // Byte shuffles that rotate each 32-bit word left by 16 and by 8.
    const __m256i rot16 = _mm256_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13, 2, 3, 0, 1, 6, 7, 4,
                                           5, 10, 11, 8, 9, 14, 15, 12, 13);
    const __m256i rot8 = _mm256_setr_epi8(3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14, 3, 0, 1, 2, 7, 4, 5, 6,
                                          11, 8, 9, 10, 15, 12, 13, 14);
    __m256i x[16];
    for (int i = 0; i < 16; ++i) x[i] = s[i];
    for (int i = 0; i < Rounds / 2; ++i) {
        chacha_qr8(x[0], x[4], x[8], x[12], rot16, rot8);
        chacha_qr8(x[1], x[5], x[9], x[13], rot16, rot8);
        chacha_qr8(x[2], x[6], x[10], x[14], rot16, rot8);
        chacha_qr8(x[3], x[7], x[11], x[15], rot16, rot8);
        chacha_qr8(x[0], x[5], x[10], x[15], rot16, rot8);
        chacha_qr8(x[1], x[6], x[11], x[12], rot16, rot8);
        chacha_qr8(x[2], x[7], x[8], x[13], rot16, rot8);
        chacha_qr8(x[3], x[4], x[9], x[14], rot16, rot8);
    }
    // x[i] holds word i of the eight blocks. Transpose four words at a time:
    // u[k] then holds words 4g..4g+3 of block k (low half) and k+4 (high half).
    for (int g = 0; g < 4; ++g) {
        const __m256i a = _mm256_add_epi32(x[4 * g], s[4 * g]), b = _mm256_add_epi32(x[4 * g + 1], s[4 * g + 1]);
        const __m256i c = _mm256_add_epi32(x[4 * g + 2], s[4 * g + 2]), d = _mm256_add_epi32(x[4 * g + 3], s[4 * g + 3]);
        const __m256i t0 = _mm256_unpacklo_epi32(a, b), t1 = _mm256_unpackhi_epi32(a, b);
        const __m256i t2 = _mm256_unpacklo_epi32(c, d), t3 = _mm256_unpackhi_epi32(c, d);
        const __m256i u[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                              _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
        for (int k = 0; k < 4; ++k) {
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 64 * k + 16 * g), _mm256_castsi256_si128(u[k]));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 64 * (k + 4) + 16 * g),
                             _mm256_extracti128_si256(u[k], 1));
        }
    }
}
#endif

/// Fills `buf` from the kernel's CSPRNG. Throws std::system_error if the
/// kernel cannot deliver (never expected on Linux >= 3.17 after boot).
inline void os_entropy(void* buf, std::size_t n) {
    auto* p = static_cast<unsigned char*>(buf);
    while (n > 0) {
        const auto r = ::getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            throw std::system_error(errno, std::system_category(), "coord: getrandom");
        }
        p += r;
        n -= static_cast<std::size_t>(r);
    }
}

/// Bumped in the child of every fork() (once a generator has registered the
/// handler), so per-thread generators re-key there.
inline std::atomic<std::uint64_t> fork_generation{1};

inline void register_fork_handler() {
    static const bool registered = [] {
        ::pthread_atfork(nullptr, nullptr, [] { fork_generation.fetch_add(1, std::memory_order_relaxed); });
        return true;
    }();
    (void)registered;
}

/// One thread's fast-key-erasure ChaCha12 generator.
class chacha_drbg {
public:
    std::uint64_t next_u64() {
        if (pos_ + 8 > out_.size() || generation_ != fork_generation.load(std::memory_order_relaxed)) [[unlikely]]
            refill();
        std::uint64_t v;
        std::memcpy(&v, out_.data() + pos_, 8);
        pos_ += 8;
        return v;
    }

private:
    static constexpr std::size_t blocks = 16;
    static constexpr std::uint64_t rekey_after = 1u << 20;  // bytes from one OS key

    void refill() {
        register_fork_handler();
        const auto gen = fork_generation.load(std::memory_order_relaxed);
        if (gen != generation_ || produced_ >= rekey_after) {
            os_entropy(key_, sizeof key_);
            generation_ = gen;
            produced_ = 0;
        }
        std::uint8_t stream[64 * blocks];
        const std::uint32_t nonce[3] = {0, 0, 0};
#ifdef COORD_X86_SIMD
        if (cpu_has_avx2()) {
            for (std::uint32_t b = 0; b < blocks; b += 8) chacha_blocks8_avx2<12>(key_, b, nonce, stream + 64 * b);
        } else
#endif
            for (std::uint32_t b = 0; b < blocks; b += 4) chacha_blocks4<12>(key_, b, nonce, stream + 64 * b);
        std::memcpy(key_, stream, sizeof key_);  // the next key; the old one is gone
        std::memcpy(out_.data(), stream + sizeof key_, out_.size());
        std::memset(stream, 0, sizeof stream);
        pos_ = 0;
        produced_ += out_.size();
    }

    std::uint32_t key_[8] = {};
    std::array<std::uint8_t, 64 * blocks - 32> out_{};
    std::size_t pos_ = out_.size();
    std::uint64_t generation_ = 0;  // 0: never keyed
    std::uint64_t produced_ = 0;
};

}  // namespace detail

/// The operating system's CSPRNG, buffered per thread through a ChaCha12
/// fast-key-erasure generator (see the file comment). Stateless handle: any
/// number of copies, safe from any thread, fork-safe.
struct os_random {
    /// 64 uniformly random bits.
    std::uint64_t next_u64() const {
        thread_local detail::chacha_drbg drbg;
        return drbg.next_u64();
    }
};
static_assert(random_source<os_random>);

}  // namespace coord
