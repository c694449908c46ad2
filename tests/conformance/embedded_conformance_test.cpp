// SPDX-License-Identifier: Apache-2.0
// The conformance suites on the embedded stores: every suite of every
// concept each models (the file store keeps no sessions and cannot make an
// outside effect atomic with its done marker, so it is no ledger_run_store).
#include "conformance/fence_store_suite.hpp"
#include "conformance/ledger_run_suite.hpp"
#include "conformance/ledger_store_suite.hpp"
#include "conformance/lease_queue_suite.hpp"
#include "conformance/keeper_suite.hpp"
#include "conformance/lease_store_suite.hpp"
#include "conformance/segment_allocator_suite.hpp"
#include "conformance/session_store_suite.hpp"
#include "conformance/time_reservation_suite.hpp"

INSTANTIATE_TYPED_TEST_SUITE_P(Memory, FenceStoreConformance, coord::test::memory_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(File, FenceStoreConformance, coord::test::file_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, LeaseStoreConformance, coord::test::memory_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, KeeperConformance, coord::test::memory_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(File, LeaseStoreConformance, coord::test::file_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(File, KeeperConformance, coord::test::file_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, SegmentAllocatorConformance, coord::test::memory_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(File, SegmentAllocatorConformance, coord::test::file_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, LedgerStoreConformance, coord::test::memory_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(File, LedgerStoreConformance, coord::test::file_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, SessionStoreConformance, coord::test::memory_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, TimeReservationConformance, coord::test::memory_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(File, TimeReservationConformance, coord::test::file_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, LedgerRunConformance, coord::test::memory_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, LeaseQueueConformance, coord::test::memory_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(File, LeaseQueueConformance, coord::test::file_factory);
