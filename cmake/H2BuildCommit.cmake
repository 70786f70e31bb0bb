# Writes OUTPUT (a header defining H2_BUILD_COMMIT) from the git checkout at SOURCE_DIR: the
# commit, "-dirty" when tracked files differ from it, "unknown" outside a git checkout. Run at
# every build (cmake -P); the file is rewritten only when the text changes, so an unchanged commit
# rebuilds nothing.
execute_process(
  COMMAND git -C "${SOURCE_DIR}" describe --always --dirty --abbrev=12 --exclude=*
  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE failed ERROR_QUIET)
if(failed OR commit STREQUAL "")
  set(commit "unknown")
endif()
set(text "#define H2_BUILD_COMMIT \"${commit}\"\n")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUTPUT}" "${text}")
endif()
