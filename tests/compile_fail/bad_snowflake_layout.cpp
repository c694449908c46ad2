// SPDX-License-Identifier: Apache-2.0
// Must NOT compile: 42 + 10 + 12 bits do not fit beside the sign bit.
#include <coord/snowflake.hpp>

int main() { return static_cast<int>(coord::snowflake_layout<42, 10, 12>::max_node); }
