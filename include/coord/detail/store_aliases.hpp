// SPDX-License-Identifier: Apache-2.0
// coord/detail/store_aliases.hpp: the everyday names of the primitives on
// one store type, declared in the namespace that uses the macros (each
// engine's, and coord::memory and coord::file): coord::postgres::lease_manager
// is basic_lease_manager<coord::postgres::store>, and so on. One macro per
// capability, so that a store declares only the names of what it models.
#pragma once

#include "coord/clock.hpp"
#include "coord/fence.hpp"
#include "coord/job_ledger.hpp"
#include "coord/lease.hpp"
#include "coord/segment.hpp"
#include "coord/session.hpp"
#include "coord/snowflake.hpp"

/// fenced_resource, keyed_fenced_resource, lease_manager, segment_generator
/// and snowflake (the default layout on the wall clock) on `Store`: every
/// store models their capabilities.
#define COORD_STORE_ALIASES(Store)                                                                 \
    using fenced_resource = ::coord::basic_fenced_resource<Store>;                                 \
    using keyed_fenced_resource = ::coord::basic_keyed_fenced_resource<Store>;                     \
    using lease_manager = ::coord::basic_lease_manager<Store>;                                     \
    using segment_generator = ::coord::basic_segment_generator<Store>;                             \
    using snowflake = ::coord::basic_snowflake<::coord::default_layout, ::coord::system_clock, Store>

/// job_ledger on `Store` (a ledger_store).
#define COORD_STORE_LEDGER_ALIAS(Store) using job_ledger = ::coord::basic_job_ledger<Store>

/// session_manager on `Store` (a session_store).
#define COORD_STORE_SESSION_ALIAS(Store) using session_manager = ::coord::basic_session_manager<Store>
