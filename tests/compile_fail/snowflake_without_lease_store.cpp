// SPDX-License-Identifier: Apache-2.0
// Must NOT compile: a store with reservations but no leases cannot hold the
// node id, and the generator must not drop that promise without a word.
#include <coord/snowflake.hpp>

struct reservations_only {
    coord::result<std::int64_t, coord::write_error> time_reserve(std::string_view, std::int64_t until_ms,
                                                                 coord::fence_token) {
        return until_ms;
    }
};

int main() {
    reservations_only store;
    coord::basic_snowflake<coord::default_layout, coord::system_clock, reservations_only> ids{store, {}};
    return ids.next() ? 0 : 1;
}
