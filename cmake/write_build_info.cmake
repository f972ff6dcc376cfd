# Writes core/build_info.hpp with the version and the git commit of the source tree, marked
# "-dirty" when it has uncommitted changes. Run at every build (configure_file rewrites the header,
# and so triggers recompilation, only when its content changes), so results files never name a
# stale commit. Inputs: SOURCE_DIR, OUTPUT, PROJECT_VERSION.
execute_process(COMMAND git rev-parse --short=12 HEAD
                WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE DLSCALE_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET RESULT_VARIABLE git_result)
if(NOT git_result EQUAL 0 OR DLSCALE_GIT_COMMIT STREQUAL "")
  set(DLSCALE_GIT_COMMIT "unknown")
else()
  execute_process(COMMAND git diff --quiet HEAD -- .
                  WORKING_DIRECTORY ${SOURCE_DIR} RESULT_VARIABLE dirty ERROR_QUIET)
  if(NOT dirty EQUAL 0)
    string(APPEND DLSCALE_GIT_COMMIT "-dirty")
  endif()
endif()
configure_file(${SOURCE_DIR}/cmake/build_info.hpp.in ${OUTPUT} @ONLY)
