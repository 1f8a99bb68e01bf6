# Compiles SOURCE (which must fail) and checks that the compiler's output holds EXPECT, in exactly
# EXPECT_COUNT of its "error:" lines when that is given, and, when MAX_ERRORS is given, at most that many
# "error:" lines (one readable error, not a cascade).
#   cmake -DCXX=... -DSOURCE=... -DEXPECT=... -DFLAGS="..." [-DMAX_ERRORS=1] [-DEXPECT_COUNT=2] -P check.cmake
separate_arguments(flag_list UNIX_COMMAND "${FLAGS}")
execute_process(COMMAND ${CXX} ${flag_list} -fsyntax-only ${SOURCE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must not")
endif()
string(FIND "${err}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the compiler's output lacks \"${EXPECT}\":\n${err}")
endif()
# The errors that say EXPECT, line by line (the compiler also echoes the source line of a static_assert,
# which may hold the message, so only "error:" lines count). No CMake list: a line's ';' or unbalanced
# '[' would split or join its items.
set(rest "${err}\n")
set(found 0)
string(FIND "${rest}" "\n" eol)
while(NOT eol EQUAL -1)
  string(SUBSTRING "${rest}" 0 ${eol} line)
  math(EXPR eol "${eol} + 1")
  string(SUBSTRING "${rest}" ${eol} -1 rest)
  string(FIND "${line}" "error:" is_error)
  string(FIND "${line}" "${EXPECT}" says)
  if(NOT is_error EQUAL -1 AND NOT says EQUAL -1)
    math(EXPR found "${found} + 1")
  endif()
  string(FIND "${rest}" "\n" eol)
endwhile()
if(DEFINED EXPECT_COUNT AND NOT found EQUAL EXPECT_COUNT)
  message(FATAL_ERROR "${found} errors say \"${EXPECT}\", expected ${EXPECT_COUNT}:\n${err}")
endif()
string(REGEX MATCHALL "error:" errors "${err}")
list(LENGTH errors count)
if(DEFINED MAX_ERRORS AND count GREATER MAX_ERRORS)
  message(FATAL_ERROR "${count} errors, expected at most ${MAX_ERRORS}:\n${err}")
endif()
message(STATUS "${SOURCE}: failed to compile as expected, ${count} error(s), with \"${EXPECT}\"")
