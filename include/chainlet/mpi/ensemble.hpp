// Ensembles and parameter sweeps over MPI: N independent members (different seeds, different
// hyperparameters), member i run by rank i mod P, their results gathered on rank 0. No communication
// happens until the gather at the end, so the members train at full speed on their ranks.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "chainlet/mpi/environment.hpp"

namespace chainlet::mpi {

// Calls member(i) for the members i of this rank (i = rank, rank + P, ...; a collective call: every
// rank of comm calls it with the same count). Returns the results of all members in member order on
// rank 0 and an empty vector on the other ranks. R is copied as bytes, so it must be trivially
// copyable (a struct of numbers, std::array of parameters for a small model). An exception from a
// member propagates on its rank; run_or_abort then ends the job.
template <class R, class F>
std::vector<R> ensemble(MPI_Comm comm, std::size_t members, F&& member) {
    static_assert(std::is_trivially_copyable_v<R>, "chainlet::mpi::ensemble: the result type must be trivially copyable");
    const std::size_t ranks = static_cast<std::size_t>(size(comm)), me = static_cast<std::size_t>(rank(comm));
    auto members_of = [&](std::size_t r) { return r < members ? (members - r + ranks - 1) / ranks : 0; };
    std::vector<R> mine;
    mine.reserve(members_of(me));
    for (std::size_t i = me; i < members; i += ranks) mine.push_back(member(i));

    // Rank r's results arrive as one block of bytes, in its member order r, r + P, ...
    std::vector<int> bytes(ranks), offsets(ranks);
    for (std::size_t r = 0, at = 0; r < ranks; ++r) {
        bytes[r] = static_cast<int>(members_of(r) * sizeof(R));
        offsets[r] = static_cast<int>(at);
        at += members_of(r) * sizeof(R);
    }
    std::vector<unsigned char> gathered(me == 0 ? members * sizeof(R) : 0);
    MPI_Gatherv(mine.data(), static_cast<int>(mine.size() * sizeof(R)), MPI_BYTE, gathered.data(), bytes.data(),
                offsets.data(), MPI_BYTE, 0, comm);
    std::vector<R> all;
    if (me != 0) return all;
    all.resize(members);
    for (std::size_t r = 0; r < ranks; ++r)
        for (std::size_t k = 0; k < members_of(r); ++k)
            std::memcpy(&all[r + k * ranks], gathered.data() + static_cast<std::size_t>(offsets[r]) + k * sizeof(R),
                        sizeof(R));
    return all;
}

}  // namespace chainlet::mpi
