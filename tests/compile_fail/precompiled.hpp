// The library headers that the compile_fail cases include (every one of them; shape_mistakes.cpp includes
// this file). tests/CMakeLists.txt precompiles them once with g++ (a .gch beside a copy of this file) and
// gives every case `-include` of the copy, so each parses only its own lines; a case's own includes are
// then no-ops (each header's #pragma once), and what it declares and what fails is the same. No #pragma
// once of its own: g++ compiles it as a main file (a warning there), and it only includes guarded headers.

#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/hvp.hpp"
#include "chainlet/derivatives/taylor.hpp"
#include "chainlet/io/checkpoint.hpp"
