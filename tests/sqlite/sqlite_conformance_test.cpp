// SPDX-License-Identifier: Apache-2.0
// The conformance suites on SQLite: every suite of every concept it models,
// the same tests as memory, file and PostgreSQL.
#include "conformance/fence_store_suite.hpp"
#include "conformance/lease_queue_suite.hpp"
#include "conformance/keeper_suite.hpp"
#include "conformance/lease_store_suite.hpp"
#include "conformance/ledger_run_suite.hpp"
#include "conformance/ledger_store_suite.hpp"
#include "conformance/segment_allocator_suite.hpp"
#include "conformance/session_store_suite.hpp"
#include "conformance/time_reservation_suite.hpp"
#include "sqlite/sqlite_support.hpp"

INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, FenceStoreConformance, coord::test::sqlite_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, LeaseStoreConformance, coord::test::sqlite_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, KeeperConformance, coord::test::sqlite_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, SegmentAllocatorConformance, coord::test::sqlite_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, LedgerStoreConformance, coord::test::sqlite_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, SessionStoreConformance, coord::test::sqlite_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, TimeReservationConformance, coord::test::sqlite_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, LedgerRunConformance, coord::test::sqlite_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, LeaseQueueConformance, coord::test::sqlite_factory);
