// SPDX-License-Identifier: Apache-2.0
// BM_Peer_Libjwt_Verify/<alg>: the JWT benchmark tokens through libjwt 1.10 (Debian's
// package), registered into jwt_bench. libjwt 1.10 has no PS* and no EdDSA.
#include <benchmark/benchmark.h>

#include <jwt.h>

#include <string>
#include <string_view>

#include "jwt_fixture.hpp"

namespace {

using coord::bench::fixture;
using coord::bench::get;
using coord::jwt::algorithm;

void BM_Peer_Libjwt_Verify(benchmark::State& state, algorithm alg) {
    const fixture& f = get(alg);
    const std::string& k = alg == algorithm::hs256 ? f.secret : f.public_pem;
    for (auto _ : state) {
        jwt_t* jwt = nullptr;
        if (jwt_decode(&jwt, f.token.c_str(), reinterpret_cast<const unsigned char*>(k.data()), static_cast<int>(k.size())) != 0) {
            state.SkipWithError("libjwt refused the token");
            break;
        }
        // libjwt 1.10 checks only the signature; read the claims coord checks.
        const bool ok = jwt_get_grant_int(jwt, "exp") > 1700000000 &&
                        std::string_view(jwt_get_grant(jwt, "iss")) == "https://auth.example.com" &&
                        std::string_view(jwt_get_grant(jwt, "aud")) == "api.example.com";
        benchmark::DoNotOptimize(ok);
        jwt_free(jwt);
    }
    state.SetItemsProcessed(state.iterations());
}

const int registered = [] {
    for (const auto& [label, alg] : {std::pair{"HS256", algorithm::hs256}, std::pair{"RS256", algorithm::rs256},
                                     std::pair{"ES256", algorithm::es256}})
        benchmark::RegisterBenchmark((std::string("BM_Peer_Libjwt_Verify/") + label).c_str(), BM_Peer_Libjwt_Verify, alg);
    return 0;
}();

}  // namespace
