// SPDX-License-Identifier: Apache-2.0
// coord/sqlite/segment.hpp: segment_allocator on SQLite (Leaf ranges).
//
// segment_allocate is one transaction: the tag's row read, the segment rule
// (coord/rules/segment.hpp) advanced, the row written, so ranges never
// overlap across the processes sharing the file. Statements: 4. A tag
// without a counter continues above the store's segment floor.
#pragma once

#include <cstdint>
#include <string_view>

#include "coord/rules/segment.hpp"
#include "coord/segment.hpp"
#include "coord/sqlite/context.hpp"

namespace coord::sqlite {

template <class Clock>
class segment_adapter {
public:
    explicit segment_adapter(detail::context<Clock>& ctx) noexcept : db_(ctx.db()) {}

    result<segment_range> segment_allocate(std::string_view tag, std::uint64_t step) {
        database::transaction t(db_, true);
        if (!t) return unexpected(*t.failed());
        auto st = t.prepare("SELECT next FROM coord_segment WHERE tag = ?1");
        if (!st) return unexpected(st.error());
        (*st)->bind(1, tag);
        auto row = t.next(**st);
        if (!row) return unexpected(row.error());
        coord::detail::segment_rule::record rec;
        rec.next = t.floors().segment + 1;  // a tag without a counter continues above the floor
        if (*row) {
            rec.next = (*st)->u64(0);
            (*st)->reset();
        }
        auto range = coord::detail::segment_rule::allocate(rec, step);
        if (!range) return range;
        auto up = t.prepare("INSERT INTO coord_segment VALUES (?1, ?2) ON CONFLICT (tag) DO UPDATE SET next = excluded.next");
        if (!up) return unexpected(up.error());
        (*up)->bind(1, tag).bind(2, detail::as_i64(rec.next));
        if (auto w = t.run(**up); !w) return unexpected(w.error());
        if (auto c = t.commit(); !c) return unexpected(c.error());
        return range;
    }

private:
    database& db_;
};

}  // namespace coord::sqlite
