// SPDX-License-Identifier: Apache-2.0
// coord/detail/store_aliases.hpp: the assembly every store ends with, written
// once: the static checks that it models the capabilities it claims, and the
// everyday names of the primitives on it, declared in the namespace that
// uses the macros (each engine's, and coord::memory and coord::file):
// coord::postgres::lease_manager is basic_lease_manager<coord::postgres::store>,
// and so on. One macro per capability, so that a store declares only the
// names of what it models; a capability with no primitive of its own
// (lease_queue_store, ledger_run_store, revocation_store) is asserted beside.
#pragma once

#include "coord/clock.hpp"
#include "coord/fence.hpp"
#include "coord/job_ledger.hpp"
#include "coord/lease.hpp"
#include "coord/segment.hpp"
#include "coord/session.hpp"
#include "coord/snowflake.hpp"

/// fenced_resource, keyed_fenced_resource, lease_manager, segment_generator
/// and snowflake (the default layout on the wall clock) on `Store`, which
/// every store models the capabilities of (checked here).
#define COORD_STORE_ALIASES(Store)                                                                 \
    static_assert(::coord::fence_store<Store> && ::coord::fence_update_store<Store>);              \
    static_assert(::coord::lease_store<Store>);                                                    \
    static_assert(::coord::time_reservation_store<Store>);                                         \
    static_assert(::coord::segment_allocator<Store>);                                              \
    using fenced_resource = ::coord::basic_fenced_resource<Store>;                                 \
    using keyed_fenced_resource = ::coord::basic_keyed_fenced_resource<Store>;                     \
    using lease_manager = ::coord::basic_lease_manager<Store>;                                     \
    using segment_generator = ::coord::basic_segment_generator<Store>;                             \
    using snowflake = ::coord::basic_snowflake<::coord::default_layout, ::coord::system_clock, Store>

/// job_ledger on `Store` (a ledger_store: checked here).
#define COORD_STORE_LEDGER_ALIAS(Store)           \
    static_assert(::coord::ledger_store<Store>); \
    using job_ledger = ::coord::basic_job_ledger<Store>

/// session_manager on `Store` (a session_store: checked here).
#define COORD_STORE_SESSION_ALIAS(Store)           \
    static_assert(::coord::session_store<Store>); \
    using session_manager = ::coord::basic_session_manager<Store>
