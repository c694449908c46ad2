# SPDX-License-Identifier: Apache-2.0
# Install rules and the CMake package `coord` (find_package(coord CONFIG)).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS coord coord_session EXPORT coordTargets)
if(TARGET coord_schedule)
  install(TARGETS coord_schedule EXPORT coordScheduleTargets)
  install(EXPORT coordScheduleTargets NAMESPACE coord:: DESTINATION "${CMAKE_INSTALL_DATADIR}/cmake/coord")
endif()
if(TARGET coord_jwt)
  install(TARGETS coord_jwt EXPORT coordJwtTargets)
  install(EXPORT coordJwtTargets NAMESPACE coord:: DESTINATION "${CMAKE_INSTALL_DATADIR}/cmake/coord")
endif()
if(TARGET coord_postgres)
  install(TARGETS coord_postgres EXPORT coordPostgresTargets)
  install(EXPORT coordPostgresTargets NAMESPACE coord:: DESTINATION "${CMAKE_INSTALL_DATADIR}/cmake/coord")
endif()
if(TARGET coord_sqlite)
  install(TARGETS coord_sqlite EXPORT coordSqliteTargets)
  install(EXPORT coordSqliteTargets NAMESPACE coord:: DESTINATION "${CMAKE_INSTALL_DATADIR}/cmake/coord")
endif()
if(TARGET coord_redis)
  install(TARGETS coord_redis EXPORT coordRedisTargets)
  install(EXPORT coordRedisTargets NAMESPACE coord:: DESTINATION "${CMAKE_INSTALL_DATADIR}/cmake/coord")
endif()
if(TARGET coord_etcd)
  install(TARGETS coord_etcd EXPORT coordEtcdTargets)
  install(EXPORT coordEtcdTargets NAMESPACE coord:: DESTINATION "${CMAKE_INSTALL_DATADIR}/cmake/coord")
endif()
if(TARGET coord_zookeeper)
  install(TARGETS coord_zookeeper EXPORT coordZooKeeperTargets)
  install(EXPORT coordZooKeeperTargets NAMESPACE coord:: DESTINATION "${CMAKE_INSTALL_DATADIR}/cmake/coord")
  install(FILES "${PROJECT_SOURCE_DIR}/cmake/coordZooKeeper.cmake" DESTINATION "${CMAKE_INSTALL_DATADIR}/cmake/coord")
endif()
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/coord" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(FILES "${PROJECT_SOURCE_DIR}/LICENSE" DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/coord")

set(COORD_CMAKE_DIR "${CMAKE_INSTALL_DATADIR}/cmake/coord")
install(EXPORT coordTargets NAMESPACE coord:: DESTINATION "${COORD_CMAKE_DIR}")
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/coordConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/coordConfig.cmake" INSTALL_DESTINATION "${COORD_CMAKE_DIR}")
write_basic_package_version_file("${PROJECT_BINARY_DIR}/coordConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES "${PROJECT_BINARY_DIR}/coordConfig.cmake" "${PROJECT_BINARY_DIR}/coordConfigVersion.cmake"
  DESTINATION "${COORD_CMAKE_DIR}")

# pkg-config: coord.pc (the header-only core; the adapters' libraries are
# named by their own pkg-config files: libcrypto, libpq, sqlite3, hiredis, libcurl; libzookeeper_mt has none).
configure_file("${PROJECT_SOURCE_DIR}/cmake/coord.pc.in" "${PROJECT_BINARY_DIR}/coord.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/coord.pc" DESTINATION "${CMAKE_INSTALL_DATADIR}/pkgconfig")

# A Debian package of the headers, the CMake package and coord.pc:
# `cpack -G DEB` in the build directory makes libcoord-dev_VERSION_all.deb.
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "libcoord-dev")
set(CPACK_PACKAGE_VENDOR "coord")
set(CPACK_PACKAGE_CONTACT "coord maintainers <coord@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION} (C++20 headers)")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_DEBIAN_FILE_NAME "DEB-DEFAULT")
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE "all")
set(CPACK_DEBIAN_PACKAGE_SECTION "libdevel")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libssl-dev (>= 3.0), libpq-dev, libsqlite3-dev, libhiredis-dev, libcurl4-openssl-dev, libzookeeper-mt-dev, libhowardhinnant-date-dev")
set(CPACK_PACKAGE_DIRECTORY "${PROJECT_BINARY_DIR}/package")
include(CPack)
