// SPDX-License-Identifier: Apache-2.0
// The eight consumer programs as one, for the build-tree ways (add_subdirectory
// and FetchContent define the same targets from coord's own CMakeLists): one
// compile instead of eight. find_package, where each component target is
// defined by the installed package, builds each program on its own, linked to
// its component alone.
#define main consumer_main
#include "consumer.cpp"
#undef main
#define main jwt_main
#include "jwt_consumer.cpp"
#undef main
#define main session_main
#include "session_consumer.cpp"
#undef main
#define main postgres_main
#include "postgres_consumer.cpp"
#undef main
#define main sqlite_main
#include "sqlite_consumer.cpp"
#undef main
#define main redis_main
#include "redis_consumer.cpp"
#undef main
#define main etcd_main
#include "etcd_consumer.cpp"
#undef main
#define main zookeeper_main
#include "zookeeper_consumer.cpp"
#undef main

#include <cstdio>

int main() {
    struct program {
        const char* name;
        int (*run)();
    };
    const program programs[] = {{"consumer", consumer_main}, {"jwt", jwt_main},   {"session", session_main},
                                {"postgres", postgres_main}, {"sqlite", sqlite_main}, {"redis", redis_main},
                                {"etcd", etcd_main},         {"zookeeper", zookeeper_main}};
    for (const auto& p : programs)
        if (const int rc = p.run(); rc != 0) {
            std::fprintf(stderr, "%s consumer: exit %d\n", p.name, rc);
            return rc;
        }
    return 0;
}
