// SPDX-License-Identifier: Apache-2.0
// coord/aliases.hpp: the everyday names of the embedded stores, and the
// checks that they model every store concept they claim:
//   coord::memory::lease_manager, ::snowflake, ...  on coord::memory_store (one process)
//   coord::file::lease_manager, ...                 on coord::file_store (one machine)
//   coord::lease_manager, coord::snowflake, ...     the short names: the memory
//                                                   store's, ONE PROCESS only
// Each engine declares its own in its store header:
// coord::postgres::lease_manager, coord::redis::snowflake,
// coord::sqlite::job_ledger, ... (coord/detail/store_aliases.hpp).
//
// The primitives' headers include no store: with your own store, include
// the primitive alone. This header is the one place where primitives and the
// embedded stores meet; the umbrella coord/coord.hpp includes it.
//
//   #include <coord/aliases.hpp>
//   coord::memory_store store;
//   coord::memory::lease_manager leases{store};
//   coord::memory::snowflake ids{store, {.node = 7}};
#pragma once

#include "coord/clock.hpp"
#include "coord/detail/store_aliases.hpp"
#include "coord/fence.hpp"
#include "coord/job_ledger.hpp"
#include "coord/lease.hpp"
#include "coord/reservation.hpp"
#include "coord/segment.hpp"
#include "coord/session.hpp"
#include "coord/snowflake.hpp"
#include "coord/storage/file.hpp"
#include "coord/storage/memory.hpp"

namespace coord {

static_assert(lease_queue_store<memory_store>);
static_assert(ledger_run_store<memory_store>);
static_assert(revocation_store<memory_store>);

static_assert(lease_queue_store<file_store>);

namespace memory {
// The primitives on one process's memory_store.
COORD_STORE_ALIASES(memory_store);
COORD_STORE_LEDGER_ALIAS(memory_store);
COORD_STORE_SESSION_ALIAS(memory_store);
}  // namespace memory

namespace file {
// The primitives on one machine's file_store.
COORD_STORE_ALIASES(file_store);
COORD_STORE_LEDGER_ALIAS(file_store);
}  // namespace file

// The short names: the memory store's (one process; not shared with another
// process or machine). Kept for existing code and quick experiments; in a
// service, name the store: coord::file::..., coord::postgres::..., ...

/// A fenced resource in a memory_store.
using fenced_resource = basic_fenced_resource<memory_store>;
/// Many fenced resources in a memory_store.
using keyed_fenced_resource = basic_keyed_fenced_resource<memory_store>;
/// Leases in a memory_store.
using lease_manager = basic_lease_manager<memory_store>;
/// The job-slot ledger in a memory_store (one process).
using job_ledger = basic_job_ledger<memory_store>;
/// Segment IDs from a memory_store's allocator (one process).
using segment_generator = basic_segment_generator<memory_store>;
/// Opaque sessions in a memory_store (timed on its steady clock).
using session_manager = basic_session_manager<memory_store>;
/// The everyday Snowflake generator: default layout, the wall clock, the
/// memory store (order and node lease within the process; use a file_store
/// or an engine for restarts and for several processes).
using snowflake = basic_snowflake<default_layout, system_clock, memory_store>;

}  // namespace coord
