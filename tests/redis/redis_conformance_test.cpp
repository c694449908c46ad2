// SPDX-License-Identifier: Apache-2.0
// The conformance suites on Redis: every suite of every concept it models
// (all but the ledger's atomic run: a job's effect is not in Redis), the same
// tests as memory, file, SQLite and PostgreSQL. The suites' manual clock is
// sent with each call here; redis_test.cpp checks that the everyday store
// judges on the server's clock.
#include "conformance/fence_store_suite.hpp"
#include "conformance/lease_queue_suite.hpp"
#include "conformance/keeper_suite.hpp"
#include "conformance/lease_store_suite.hpp"
#include "conformance/ledger_store_suite.hpp"
#include "conformance/segment_allocator_suite.hpp"
#include "conformance/session_store_suite.hpp"
#include "conformance/time_reservation_suite.hpp"
#include "redis/redis_support.hpp"

INSTANTIATE_TYPED_TEST_SUITE_P(Redis, FenceStoreConformance, coord::test::redis_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Redis, LeaseStoreConformance, coord::test::redis_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Redis, KeeperConformance, coord::test::redis_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Redis, SegmentAllocatorConformance, coord::test::redis_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Redis, LedgerStoreConformance, coord::test::redis_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Redis, SessionStoreConformance, coord::test::redis_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Redis, TimeReservationConformance, coord::test::redis_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Redis, LeaseQueueConformance, coord::test::redis_factory);
