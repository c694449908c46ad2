# SPDX-License-Identifier: Apache-2.0
# Finds the ZooKeeper C client (multi-threaded: libzookeeper_mt) and defines
# the imported target CoordZooKeeper::client. Debian's libzookeeper-mt-dev
# ships no pkg-config or CMake file. Included by coord's CMakeLists and by its
# installed package configuration.
if(NOT TARGET CoordZooKeeper::client)
  find_path(COORD_ZOOKEEPER_INCLUDE_DIR zookeeper/zookeeper.h)
  find_library(COORD_ZOOKEEPER_LIBRARY zookeeper_mt)
  if(COORD_ZOOKEEPER_INCLUDE_DIR AND COORD_ZOOKEEPER_LIBRARY)
    add_library(CoordZooKeeper::client UNKNOWN IMPORTED GLOBAL)
    set_target_properties(CoordZooKeeper::client PROPERTIES
      IMPORTED_LOCATION "${COORD_ZOOKEEPER_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${COORD_ZOOKEEPER_INCLUDE_DIR}")
  endif()
endif()
