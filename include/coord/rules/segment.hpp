// SPDX-License-Identifier: Apache-2.0
// coord/rules/segment.hpp: the segment allocation rule, and the ID range it hands out.
//
// A pure transition on records: no store, no clock, no I/O. The memory and
// file stores apply it; every engine's SQL or script is held to it by the
// conformance suites (tests/conformance/). Include the primitive's header
// (coord/segment.hpp) for its store concept and class template.
#pragma once

#include <cstdint>

#include "coord/error.hpp"
#include "coord/result.hpp"

namespace coord {

/// A half-open range of IDs [begin, end).
struct segment_range {
    std::uint64_t begin = 0;  ///< the first ID
    std::uint64_t end = 0;  ///< one past the last ID
    /// How many IDs the range holds.
    std::uint64_t size() const noexcept { return end - begin; }
    /// Equal bounds.
    friend bool operator==(const segment_range&, const segment_range&) = default;
};

/// The largest ID a segment allocator hands out (+1): IDs fit a signed 64-bit
/// column (SQL bigint, Java long).
inline constexpr std::uint64_t segment_id_limit = std::uint64_t{1} << 63;

namespace detail {

/// The allocation rule shared by the embedded allocators (the reference model).
struct segment_rule {
    struct record {
        std::uint64_t next = 1;
    };
    static result<segment_range> allocate(record& r, std::uint64_t step) {
        if (step == 0 || step > segment_id_limit - r.next) return unexpected(make_error_code(errc::range_exhausted));
        const segment_range range{r.next, r.next + step};
        r.next += step;
        return range;
    }
};

}  // namespace detail

}  // namespace coord
