// chainlet's MPI component (CMake target chainlet::mpi, built when CHAINLET_MPI is on): data-parallel
// fit and ensembles over MPI ranks. Not included by chainlet/chainlet.hpp, so the core never needs MPI.
#pragma once

#include "chainlet/mpi/ensemble.hpp"
#include "chainlet/mpi/environment.hpp"
#include "chainlet/mpi/fit.hpp"
