// SPDX-License-Identifier: Apache-2.0
// coord/coord.hpp: the umbrella header, everything in coord's core.
//
// Convenient for a first try; examples and real code include the headers of
// the primitives they use (<coord/fence.hpp>, <coord/storage/file.hpp>, ...).
// Not included: coord/schedule.hpp and coord/cron.hpp (they need date/tz,
// target coord::schedule), coord/jwt.hpp (OpenSSL, target coord::jwt) and
// the engine adapters (each its own library and target). coord/session.hpp
// needs nothing beyond the core and is included.
#pragma once

#include "coord/clock.hpp"
#include "coord/election.hpp"
#include "coord/error.hpp"
#include "coord/fence.hpp"
#include "coord/initial_floors.hpp"
#include "coord/job_ledger.hpp"
#include "coord/keeper.hpp"
#include "coord/lease.hpp"
#include "coord/owner.hpp"
#include "coord/random.hpp"
#include "coord/reservation.hpp"
#include "coord/result.hpp"
#include "coord/segment.hpp"
#include "coord/session.hpp"
#include "coord/snowflake.hpp"
#include "coord/storage/file.hpp"
#include "coord/uuid7.hpp"
#include "coord/storage/memory.hpp"
#include "coord/aliases.hpp"
