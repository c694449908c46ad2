// SPDX-License-Identifier: Apache-2.0
// The conformance suites on a standalone ZooKeeper server: every suite of the
// concepts it models. The suites' manual clock is written with each lease
// record (and judges the ledger's times) here; zk_test.cpp checks the everyday store, whose terms the
// ensemble's own stamps judge, and the session-bound leases.
#include "conformance/fence_store_suite.hpp"
#include "conformance/keeper_suite.hpp"
#include "conformance/lease_queue_suite.hpp"
#include "conformance/lease_store_suite.hpp"
#include "conformance/ledger_store_suite.hpp"
#include "conformance/segment_allocator_suite.hpp"
#include "conformance/time_reservation_suite.hpp"
#include "zookeeper/zk_support.hpp"

INSTANTIATE_TYPED_TEST_SUITE_P(ZooKeeper, FenceStoreConformance, coord::test::zk_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(ZooKeeper, LeaseStoreConformance, coord::test::zk_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(ZooKeeper, LeaseQueueConformance, coord::test::zk_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(ZooKeeper, KeeperConformance, coord::test::zk_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(ZooKeeper, LedgerStoreConformance, coord::test::zk_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(ZooKeeper, SegmentAllocatorConformance, coord::test::zk_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(ZooKeeper, TimeReservationConformance, coord::test::zk_factory);
