# SPDX-License-Identifier: Apache-2.0
# Install rules and the CMake package `coord` (find_package(coord CONFIG)).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS coord EXPORT coordTargets)
if(TARGET coord_schedule)
  install(TARGETS coord_schedule EXPORT coordScheduleTargets)
  install(EXPORT coordScheduleTargets NAMESPACE coord:: DESTINATION "${CMAKE_INSTALL_DATADIR}/cmake/coord")
endif()
if(TARGET coord_session)
  install(TARGETS coord_session EXPORT coordSessionTargets)
  install(EXPORT coordSessionTargets NAMESPACE coord:: DESTINATION "${CMAKE_INSTALL_DATADIR}/cmake/coord")
endif()
if(TARGET coord_postgres)
  install(TARGETS coord_postgres EXPORT coordPostgresTargets)
  install(EXPORT coordPostgresTargets NAMESPACE coord:: DESTINATION "${CMAKE_INSTALL_DATADIR}/cmake/coord")
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
