// SPDX-License-Identifier: Apache-2.0
// The conformance suites on PostgreSQL: the same tests as memory and file.
// The suites' manual clock is sent with each call here; tests in
// postgres_test.cpp check that the everyday store judges on the server's clock.
#include "conformance/fence_store_suite.hpp"
#include "conformance/lease_queue_suite.hpp"
#include "conformance/keeper_suite.hpp"
#include "conformance/lease_store_suite.hpp"
#include "conformance/ledger_run_suite.hpp"
#include "conformance/ledger_store_suite.hpp"
#include "conformance/segment_allocator_suite.hpp"
#include "conformance/session_store_suite.hpp"
#include "conformance/time_reservation_suite.hpp"
#include "postgres/pg_support.hpp"

INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, FenceStoreConformance, coord::test::postgres_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, LeaseStoreConformance, coord::test::postgres_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, KeeperConformance, coord::test::postgres_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, SegmentAllocatorConformance, coord::test::postgres_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, LedgerStoreConformance, coord::test::postgres_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, SessionStoreConformance, coord::test::postgres_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, TimeReservationConformance, coord::test::postgres_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, LedgerRunConformance, coord::test::postgres_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, LeaseQueueConformance, coord::test::postgres_factory);
