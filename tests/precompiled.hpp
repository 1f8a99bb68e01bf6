// The headers nearly every test program reads, compiled once into a precompiled header the test
// programs share (tests/CMakeLists.txt): Catch2, the whole library, the derivative passes and the file
// formats. Nothing here may depend on a macro a program defines (support.hpp reads CHAINLET_TEST_TYPES,
// so it stays out).
#pragma once

#include <catch2/catch.hpp>

#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/hvp.hpp"
#include "chainlet/derivatives/taylor.hpp"
#include "chainlet/io/architecture.hpp"
#include "chainlet/io/checkpoint.hpp"
#include "chainlet/io/safetensors.hpp"
