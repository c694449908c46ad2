// SPDX-License-Identifier: Apache-2.0
// coord/detail/engine_outcome.hpp: the one place that decides what an engine
// reports when a call to its server did not succeed, for every engine.
#pragma once

#include <system_error>

#include "coord/error.hpp"

namespace coord::detail {

/// How far a failed call got.
enum class call_fate {
    not_sent,          ///< nothing reached the server (no connection, the send failed)
    lost_after_send,   ///< the request was sent and the connection broke before the answer
    failed_on_server,  ///< the server answered with an error: the statement failed or was cancelled, and rolled back
};

/// The error a failed call returns. Only a writing call whose connection
/// broke after it was sent may have applied: errc::outcome_unknown
/// (condition::outcome_unknown). Every other failure certainly did not apply
/// and keeps the engine's own code (condition::unavailable), which names
/// what went wrong.
/// The engine's own words (the server's message) stay with the error either way.
inline error engine_failure(call_fate fate, bool writes, error engine_error) {
    if (fate == call_fate::lost_after_send && writes)
        return error(make_error_code(errc::outcome_unknown), engine_error.message());
    return engine_error;
}

}  // namespace coord::detail
