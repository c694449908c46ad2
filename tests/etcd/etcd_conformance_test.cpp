// SPDX-License-Identifier: Apache-2.0
// The conformance suites on etcd (one member): every suite of the concepts it
// models, the same tests as the other stores. The suites' manual clock drives
// expiry here (a lease whose term ended on it is revoked before the next
// call, as etcd's own timer would); etcd_test.cpp checks the everyday store,
// whose terms etcd's leader ends.
#include "conformance/fence_store_suite.hpp"
#include "conformance/keeper_suite.hpp"
#include "conformance/lease_queue_suite.hpp"
#include "conformance/lease_store_suite.hpp"
#include "conformance/segment_allocator_suite.hpp"
#include "conformance/time_reservation_suite.hpp"
#include "etcd/etcd_support.hpp"

INSTANTIATE_TYPED_TEST_SUITE_P(Etcd, FenceStoreConformance, coord::test::etcd_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Etcd, LeaseStoreConformance, coord::test::etcd_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Etcd, KeeperConformance, coord::test::etcd_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Etcd, LeaseQueueConformance, coord::test::etcd_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Etcd, SegmentAllocatorConformance, coord::test::etcd_factory);
INSTANTIATE_TYPED_TEST_SUITE_P(Etcd, TimeReservationConformance, coord::test::etcd_factory);
