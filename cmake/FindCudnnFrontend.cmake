# Finds NVIDIA's cuDNN frontend, the header-only C++ layer over cuDNN's graph API
# (cudnn_frontend.h). Looks in CUDNN_FRONTEND_INCLUDE_DIR if set, then CUDNN_FRONTEND_ROOT, then
# .cudnn-frontend/ in the source tree, where scripts/fetch-cudnn-frontend.sh puts the pinned
# version. Defines CudnnFrontend::headers and CudnnFrontend_VERSION ("1.20.0").
find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
          HINTS ${CUDNN_FRONTEND_ROOT} ${CMAKE_SOURCE_DIR}/.cudnn-frontend
          PATH_SUFFIXES include NO_DEFAULT_PATH)
find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h)
# A folder named by hand that does not hold the headers counts as not found.
if(CUDNN_FRONTEND_INCLUDE_DIR AND NOT EXISTS ${CUDNN_FRONTEND_INCLUDE_DIR}/cudnn_frontend.h)
  set(CUDNN_FRONTEND_INCLUDE_DIR CUDNN_FRONTEND_INCLUDE_DIR-NOTFOUND CACHE PATH
      "Folder of cudnn_frontend.h" FORCE)
endif()
if(CUDNN_FRONTEND_INCLUDE_DIR AND EXISTS ${CUDNN_FRONTEND_INCLUDE_DIR}/cudnn_frontend_version.h)
  file(STRINGS ${CUDNN_FRONTEND_INCLUDE_DIR}/cudnn_frontend_version.h cudnn_frontend_version_lines
       REGEX "^#define CUDNN_FRONTEND_(MAJOR|MINOR|PATCH)_VERSION +[0-9]+")
  foreach(part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*CUDNN_FRONTEND_${part}_VERSION +([0-9]+).*" "\\1"
           cudnn_frontend_${part} "${cudnn_frontend_version_lines}")
  endforeach()
  set(CudnnFrontend_VERSION ${cudnn_frontend_MAJOR}.${cudnn_frontend_MINOR}.${cudnn_frontend_PATCH})
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CudnnFrontend REQUIRED_VARS CUDNN_FRONTEND_INCLUDE_DIR
                                  VERSION_VAR CudnnFrontend_VERSION)
if(CudnnFrontend_FOUND AND NOT TARGET CudnnFrontend::headers)
  add_library(CudnnFrontend::headers INTERFACE IMPORTED)
  # SYSTEM: dlscale's -Wall -Wextra -Wpedantic are for dlscale's own code, not NVIDIA's headers.
  # The frontend's JSON (de)serialization (nlohmann/json, a large header) is not used here.
  set_target_properties(CudnnFrontend::headers PROPERTIES
                        INTERFACE_SYSTEM_INCLUDE_DIRECTORIES ${CUDNN_FRONTEND_INCLUDE_DIR}
                        INTERFACE_INCLUDE_DIRECTORIES ${CUDNN_FRONTEND_INCLUDE_DIR}
                        INTERFACE_COMPILE_DEFINITIONS CUDNN_FRONTEND_SKIP_JSON_LIB)
endif()
mark_as_advanced(CUDNN_FRONTEND_INCLUDE_DIR)
