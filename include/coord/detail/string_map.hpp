// SPDX-License-Identifier: Apache-2.0
// coord/detail/string_map.hpp: the string-keyed tables the embedded stores
// keep their records in.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace coord::detail {

/// Hash for string-keyed maps that accepts string_view without a copy.
struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
template <class V>
using string_map = std::unordered_map<std::string, V, string_hash, std::equal_to<>>;

/// Finds `key`, inserting a default record when it is missing.
template <class V>
V& find_or_insert(string_map<V>& m, std::string_view key) {
    auto it = m.find(key);
    if (it == m.end()) it = m.emplace(std::string(key), V{}).first;
    return it->second;
}

}  // namespace coord::detail
