# Runs COMMAND (arguments separated by |) and passes only if it exits non-zero, within TIMEOUT seconds, and its
# output matches EXPECT. Used for the MPI jobs in which one rank fails.
#   cmake -DCOMMAND=... -DEXPECT=regex -DTIMEOUT=seconds -P expect_failure.cmake
string(REPLACE "|" ";" command "${COMMAND}")
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${TIMEOUT})
message("${out}${err}")
if(rc STREQUAL "0")
  message(FATAL_ERROR "expected a non-zero exit status, the job succeeded")
elseif(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "expected a non-zero exit status, got: ${rc}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "exit status ${rc} as expected, but the output does not match '${EXPECT}'")
endif()
message("exit status ${rc} and the expected message: pass")
