# Debian's libcaf-dev ships no CMake package: find CAF 0.17 by hand and expose CAF::core,
# CAF::io and (when present) CAF::openssl as imported targets.
find_path(CAF_INCLUDE_DIR caf/all.hpp)
find_library(CAF_CORE_LIBRARY caf_core)
find_library(CAF_IO_LIBRARY caf_io)
find_library(CAF_OPENSSL_LIBRARY caf_openssl)
if(CAF_INCLUDE_DIR AND EXISTS "${CAF_INCLUDE_DIR}/caf/config.hpp")
  file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_v REGEX "^#define CAF_VERSION [0-9]+")
  string(REGEX REPLACE ".* ([0-9]+)$" "\\1" _caf_v "${_caf_v}")
  math(EXPR _caf_major "${_caf_v} / 10000")
  math(EXPR _caf_minor "(${_caf_v} / 100) % 100")
  math(EXPR _caf_patch "${_caf_v} % 100")
  set(CAF_VERSION "${_caf_major}.${_caf_minor}.${_caf_patch}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CAF
  REQUIRED_VARS CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY
  VERSION_VAR CAF_VERSION)
if(CAF_FOUND)
  find_package(Threads REQUIRED)
  foreach(_c core io openssl)
    string(TOUPPER ${_c} _C)
    if(CAF_${_C}_LIBRARY AND NOT TARGET CAF::${_c})
      add_library(CAF::${_c} SHARED IMPORTED)
      set_target_properties(CAF::${_c} PROPERTIES
        IMPORTED_LOCATION "${CAF_${_C}_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
        INTERFACE_LINK_LIBRARIES Threads::Threads)
    endif()
  endforeach()
  set_property(TARGET CAF::io APPEND PROPERTY INTERFACE_LINK_LIBRARIES CAF::core)
  if(TARGET CAF::openssl)
    set_property(TARGET CAF::openssl APPEND PROPERTY INTERFACE_LINK_LIBRARIES CAF::io)
  endif()
endif()
mark_as_advanced(CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY CAF_OPENSSL_LIBRARY)
