# Compiles SOURCE (which must fail) and checks that the compiler's output holds EXPECT and, when
# MAX_ERRORS is given, at most that many "error:" lines (one readable error, not a cascade).
#   cmake -DCXX=... -DSOURCE=... -DEXPECT=... -DFLAGS="..." [-DMAX_ERRORS=1] -P check.cmake
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
string(REGEX MATCHALL "error:" errors "${err}")
list(LENGTH errors count)
if(DEFINED MAX_ERRORS AND count GREATER MAX_ERRORS)
  message(FATAL_ERROR "${count} errors, expected at most ${MAX_ERRORS}:\n${err}")
endif()
message(STATUS "${SOURCE}: failed to compile as expected, ${count} error(s), with \"${EXPECT}\"")
