// SPDX-License-Identifier: Apache-2.0
// coord/detail/config.hpp: the one place where coord's macros are defined.
//
// COORD_ASSERT checks an internal invariant (a bug in coord, never a user
// input). It is active unless NDEBUG is defined or COORD_DISABLE_ASSERT is.
#pragma once

#include <cstdio>
#include <cstdlib>

#if defined(NDEBUG) || defined(COORD_DISABLE_ASSERT)
#define COORD_ASSERT(cond) ((void)0)
#else
#define COORD_ASSERT(cond)                                                       \
    ((cond) ? (void)0                                                            \
            : (std::fprintf(stderr, "coord: assertion failed: %s (%s:%d)\n", #cond, \
                            __FILE__, __LINE__),                                 \
               std::abort()))
#endif

// COORD_ALWAYS_INLINE asks the compiler to inline a hot helper whose call
// would cost more than its body (the JSON reader's strings and numbers).
#if defined(__GNUC__) || defined(__clang__)
#define COORD_ALWAYS_INLINE [[gnu::always_inline]] inline
#else
#define COORD_ALWAYS_INLINE inline
#endif

// COORD_ALWAYS_INLINE_LAMBDA, written after a lambda's parameter list, asks
// the same of a lambda (the claims reader's per-member callback).
#if defined(__GNUC__) || defined(__clang__)
#define COORD_ALWAYS_INLINE_LAMBDA __attribute__((always_inline))
#else
#define COORD_ALWAYS_INLINE_LAMBDA
#endif

// COORD_X86_SIMD marks x86-64 builds on GCC or Clang, where coord carries
// AVX2 paths (base64url decoding, ChaCha) chosen at run time by
// detail::cpu_has_avx2(); other builds use the portable code only.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define COORD_X86_SIMD 1
namespace coord::detail {
/// Whether this CPU runs AVX2 (asked once per process).
inline bool cpu_has_avx2() noexcept {
    static const bool has = __builtin_cpu_supports("avx2");
    return has;
}
}  // namespace coord::detail
#endif
