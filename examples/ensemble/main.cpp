// An ensemble over MPI: the tiny MLP of examples/tiny_mlp (4 -> 32 tanh -> 16 tanh -> 4, learning the
// exponential of a 2x2 matrix, full-batch Adam) trained from several initial seeds, member i on rank
// i mod P, all members on the same data. Rank 0 gathers each member's losses, time, checksum and
// parameters, prints one line per member, and the test loss of the members' averaged prediction.
//
//   mpirun -np 2 ensemble --members 8 --steps 2000
//
// Member i starts from seed (--seed + i) on the data of --data-seed; with --seed equal to --data-seed,
// member 0 is exactly `tiny_mlp --seed S --steps N` (same checksum).
#include <array>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/checksum.hpp"
#include "chainlet/mpi.hpp"
#include "common/args.hpp"
#include "common/matrix_exp.hpp"

using namespace chainlet;
using TinyMLP = Chain<Input<4>, Dense<32, Tanh>, Dense<16, Tanh>, Dense<4>>;

namespace {

struct MemberResult {  // copied as bytes to rank 0
    std::uint64_t seed = 0, checksum = 0;
    int rank = 0;
    double train_loss = 0, test_loss = 0, seconds = 0;
    std::array<float, TinyMLP::num_params> params{};
};

}  // namespace

int main(int argc, char** argv) {
    mpi::Session session(argc, argv);
    return mpi::run_or_abort(MPI_COMM_WORLD, [&] {
        const int rank = mpi::rank(), ranks = mpi::size();
        CLI::App app{"[mpirun -np P] ensemble: the tiny MLP of examples/tiny_mlp trained from several initial seeds, "
                     "member i on rank i mod P, all members on the same data.", "ensemble"};
        examples::show_defaults(app);
        std::uint64_t members = 8, steps = 2000, seed = 1, data_seed = 1, samples = 10000;
        int threads = 1;
        app.add_option("--members", members, "ensemble members, spread round-robin over the ranks")
            ->check(examples::whole(1, 100000));
        app.add_option("--steps", steps, "full-batch Adam(1e-3) steps per member")->check(examples::whole(1, 100000000));
        app.add_option("--seed", seed, "initial-parameter seed of member 0; member i uses seed + i")
            ->check(examples::whole(0, UINT64_MAX - 100000));
        app.add_option("--data-seed", data_seed, "seed of the training and test data, shared by all members")
            ->check(examples::whole(0, UINT64_MAX));
        app.add_option("--samples", samples, "training and test samples each")->check(examples::whole(1, 100000000));
        app.add_option("--threads", threads, "OpenMP threads per rank")->check(examples::whole(0, 1024));
        // Every rank parses the same arguments and ends alike; rank 0 alone prints help or the error.
        if (const int status = examples::parse(app, argc, argv, rank == 0); status >= 0) return status;

        // Every rank makes the same data from data_seed (in tiny_mlp's order: training, then test).
        Rng rng(data_seed);
        std::vector<float> x, y, xt, yt;
        examples::make_matrix_exp_data(samples, rng, x, y);
        examples::make_matrix_exp_data(samples, rng, xt, yt);
        if (rank == 0) {
            std::printf("%s\n", build_report().c_str());
            std::printf("ensemble: %" PRIu64 " members over %d ranks; tiny MLP 4->32->16->4 (%zu parameters), %" PRIu64
                        " full-batch Adam(1e-3) steps each on %" PRIu64 " samples (data seed %" PRIu64 ")\n",
                        members, ranks, TinyMLP::num_params, steps, samples, data_seed);
            std::fflush(stdout);
        }

        const auto results = mpi::ensemble<MemberResult>(MPI_COMM_WORLD, members, [&](std::size_t i) {
            MemberResult r;
            r.seed = seed + i;
            r.rank = rank;
            std::vector<float> p(TinyMLP::num_params), g(TinyMLP::num_params);
            init_params<TinyMLP>(p, r.seed);
            Adam opt(1e-3f);
            FitOptions o;
            o.epochs = steps;  // one full-batch step per epoch
            o.threads = threads;
            r.seconds = fit<TinyMLP>(p, SquaredError{}, x, y, opt, o).seconds;
            r.train_loss = value_and_gradient<TinyMLP>(p, g, x, y, SquaredError{}, threads);
            r.test_loss = value_and_gradient<TinyMLP>(p, g, xt, yt, SquaredError{}, threads);
            r.checksum = checksum(std::span<const float>(p));
            std::copy(p.begin(), p.end(), r.params.begin());
            return r;
        });
        if (rank != 0) return 0;

        // The ensemble's prediction: the mean of the members' outputs on the test set.
        std::vector<double> mean_out(yt.size(), 0.0);
        std::vector<float> out(yt.size());
        double sum = 0, sum2 = 0;
        for (std::size_t i = 0; i < results.size(); ++i) {
            const MemberResult& r = results[i];
            std::printf("member=%zu rank=%d seed=%" PRIu64
                        " train_loss=%.6g test_loss=%.6g seconds=%.3f checksum=%016" PRIx64 "\n",
                        i, r.rank, r.seed, r.train_loss, r.test_loss, r.seconds, r.checksum);
            predict<TinyMLP>(r.params, xt, out, threads);
            for (std::size_t j = 0; j < out.size(); ++j) mean_out[j] += out[j] / static_cast<double>(members);
            sum += r.test_loss;
            sum2 += r.test_loss * r.test_loss;
        }
        double ensemble_loss = 0;  // mean over samples of the squared error summed over the 4 outputs
        for (std::size_t j = 0; j < yt.size(); ++j) ensemble_loss += (mean_out[j] - yt[j]) * (mean_out[j] - yt[j]);
        ensemble_loss /= static_cast<double>(samples);
        const double m = static_cast<double>(members), mean = sum / m;
        std::printf("ensemble: member test_loss mean=%.6g sd=%.3g; test_loss of the averaged prediction=%.6g\n", mean,
                    std::sqrt(std::max(sum2 / m - mean * mean, 0.0)), ensemble_loss);
        return 0;
    });
}
