// Data-parallel training over MPI: every rank holds the whole data set and the same parameters,
// computes the gradient of its slice of each global batch, and one in-place MPI_Allreduce per step
// sums the slices' gradients (and losses) into the gradient of the whole batch. Every rank then takes
// the same optimiser step from the same sums, so parameters stay bit-identical on all ranks.
//
// All ranks shuffle with the same seed, so they agree on the global batch order without sending any
// data. A global batch of m samples is cut into contiguous slices, rank r taking rows
// [m r / P, m (r + 1) / P); its mean gradient g_r is weighted by its share m_r / m, so the sum over
// ranks is the mean gradient of the whole batch: g = sum_r (m_r / m) g_r.
#pragma once

#include <bit>

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "chainlet/checksum.hpp"
#include "chainlet/mpi/environment.hpp"
#include "chainlet/train.hpp"

namespace chainlet::mpi {

// The fit extension (see WholeBatch in chainlet/train.hpp) that spreads each batch over the ranks of
// comm and sums their gradients with one MPI_Allreduce.
struct AllreduceBatch {
    MPI_Comm comm = MPI_COMM_WORLD;
    std::size_t ranks = 1, rank = 0;

    explicit AllreduceBatch(MPI_Comm c)
        : comm(c), ranks(static_cast<std::size_t>(size(c))), rank(static_cast<std::size_t>(mpi::rank(c))) {}

    WholeBatch::Slice share(std::size_t m) const {
        const std::size_t first = m * rank / ranks;
        return {first, m * (rank + 1) / ranks - first};
    }
    // gl: this rank's mean gradient over its count samples, then its mean loss.
    template <class T>
    void reduce(std::span<T> gl, std::size_t count, std::size_t m) const {
        if (ranks == 1) return;
        const T weight = static_cast<T>(static_cast<double>(count) / static_cast<double>(m));
        for (T& v : gl) v *= weight;
        MPI_Allreduce(MPI_IN_PLACE, gl.data(), static_cast<int>(gl.size()), datatype<T>(), MPI_SUM, comm);
    }
};

// FNV-1a checksums of p from every rank of comm (on every rank).
template <class T>
std::vector<std::uint64_t> checksums(MPI_Comm comm, std::span<const T> p) {
    std::vector<std::uint64_t> all(static_cast<std::size_t>(size(comm)));
    const std::uint64_t mine = checksum(p);
    MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm);
    return all;
}

namespace detail {

// Every rank must pass the same data sizes and options, or the ranks would cut different batches and
// wait in different collectives. All ranks see all ranks' values, so all reach the same verdict.
inline void expect_same_on_all_ranks(MPI_Comm comm, const std::vector<std::uint64_t>& mine,
                                     const char* const* names) {
    const std::size_t k = mine.size(), ranks = static_cast<std::size_t>(size(comm));
    std::vector<std::uint64_t> all(k * ranks);
    MPI_Allgather(mine.data(), static_cast<int>(k), MPI_UINT64_T, all.data(), static_cast<int>(k), MPI_UINT64_T,
                  comm);
    for (std::size_t r = 1; r < ranks; ++r)
        for (std::size_t i = 0; i < k; ++i)
            if (all[r * k + i] != all[i])
                throw std::invalid_argument("chainlet::mpi::fit: " + std::string(names[i]) + " differs between ranks: " +
                                            std::to_string(all[i]) + " on rank 0, " + std::to_string(all[r * k + i]) +
                                            " on rank " + std::to_string(r) + "; every rank must pass the same");
}

}  // namespace detail

// chainlet::fit, data-parallel over the ranks of comm (a collective call: every rank calls it with the
// same data and options). Rank 0's initial parameters are broadcast first, so all ranks start alike.
// on_step and on_epoch run on rank 0 only (they report the loss of the whole batch); the validation set
// and stop_when run on every rank and must decide alike there (the same validation data on every
// rank do, since the parameters are the same bits). At the end the
// ranks compare checksums of their parameters and throw std::runtime_error if they differ.
// With one rank it is chainlet::fit, bit for bit.
template <class Net, std::ranges::contiguous_range P, class L, chainlet::detail::Inputs X,
          std::ranges::contiguous_range Y, class Opt>
FitResult fit(MPI_Comm comm, P&& p, const L& loss, const X& x, const Y& y, Opt& opt, FitOptions o = {}) {
    using T = chainlet::detail::value_t<P>;
    chainlet::detail::expect_size("chainlet::mpi::fit", "the parameter buffer", Net::num_params, std::ranges::size(p));
    static const char* const names[] = {"the number of input values", "the number of targets", "epochs", "batch",
                                        "seed", "shuffle", "patience", "the number of penalties", "a validation set",
                                        "restore_best", "min_delta (its bits)", "clip_norm (its bits)", "a schedule"};
    detail::expect_same_on_all_ranks(comm,
                                     {chainlet::detail::input_size(x), std::ranges::size(y), o.epochs, o.batch,
                                      o.seed, o.shuffle ? 1u : 0u, o.patience, o.penalties.size(),
                                      o.validation ? 1u : 0u, o.restore_best ? 1u : 0u,
                                      std::bit_cast<std::uint64_t>(o.min_delta), std::bit_cast<std::uint64_t>(o.clip_norm),
                                      o.schedule ? 1u : 0u},
                                     names);
    const std::span<T> ps(std::ranges::data(p), Net::num_params);
    MPI_Bcast(ps.data(), static_cast<int>(ps.size()), datatype<T>(), 0, comm);
    if (rank(comm) != 0) o.on_step = nullptr, o.on_epoch = nullptr;
    const FitResult r = chainlet::fit<Net>(p, loss, x, y, opt, o, AllreduceBatch(comm));
    const auto sums = checksums<T>(comm, ps);
    for (std::size_t i = 1; i < sums.size(); ++i)
        if (sums[i] != sums[0])
            throw std::runtime_error("chainlet::mpi::fit: the parameters of rank " + std::to_string(i) +
                                     " differ from rank 0's after training (MPI_Allreduce did not give every rank "
                                     "the same sums)");
    return r;
}

}  // namespace chainlet::mpi
