// The per-step cost of data-parallel training: the time of one in-place MPI_Allreduce of the gradient
// buffer (num_params + 1 floats: the gradient and the loss) next to the time of a whole data-parallel
// step (this rank's share of the batch, the allreduce, the Adam step), for the tiny MLP (full batch of
// 10,000) and LeNet5 (batch 2048, and the example's default 64). Run it on 1 rank (the 1-process
// step) and on P ranks:
//
//   mpirun -np 1 build/bench/chainlet_mpi_allreduce [threads per rank, default 1]
//   mpirun -np 2 build/bench/chainlet_mpi_allreduce
//
// Rank 0 prints medians over repeats, in microseconds, on random data (timing only).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/mpi.hpp"

using namespace chainlet;
using TinyMLP = Chain<Input<4>, Dense<32, Tanh>, Dense<16, Tanh>, Dense<4>>;
using LeNet5 = Chain<Input<28, 28, 1>, Conv<5, 5, 6, ReLU>, MaxPool<2, 2>, Conv<5, 5, 16, ReLU>, MaxPool<2, 2>, Flatten,
                     Dense<120, ReLU>, Dense<84, ReLU>, Dense<10>>;

namespace {

double now_us() {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Median time of one MPI_Allreduce of n floats (batches of `calls` back to back after a barrier).
double allreduce_us(std::size_t n, int calls, int repeats) {
    std::vector<float> buf(n, 1.0f);
    std::vector<double> t;
    for (int r = 0; r < repeats + 1; ++r) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = now_us();
        for (int c = 0; c < calls; ++c)
            MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (r > 0) t.push_back((now_us() - t0) / calls);  // repeat 0 warms up
    }
    return median(t);
}

// Median time of a data-parallel training step on a batch of `batch` samples.
template <class Net, class L>
double step_us(const std::vector<float>& x, const std::vector<typename L::template target<float>>& y, std::size_t batch,
               int threads, int repeats) {
    std::vector<float> p(Net::num_params), g(Net::num_params + 1);
    init_params<Net>(p, 1);
    Adam opt(1e-4f);
    opt.init(Net::num_params);
    const mpi::AllreduceBatch split(MPI_COMM_WORLD);
    const auto [first, count] = split.share(batch);
    Workspace<Net, float> ws(count, threads);
    std::vector<double> t;
    for (int r = 0; r < repeats + 2; ++r) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = now_us();
        g[Net::num_params] = ws.value_and_gradient(p.data(), g.data(), InputRows<float>{x.data() + first * Net::in_size},
                                                   y.data() + first * L::targets_per_sample(Net::out_size), nullptr,
                                                   count, L{}, threads);
        split.reduce<float>(std::span<float>(g), count, batch);
        opt.step(std::span<float>(p), std::span<const float>(g.data(), Net::num_params));
        if (r > 1) t.push_back(now_us() - t0);  // two warm-up steps
    }
    return median(t);
}

}  // namespace

int main(int argc, char** argv) {
    mpi::Session session(argc, argv);
    return mpi::run_or_abort(MPI_COMM_WORLD, [&] {
        const int threads = argc > 1 ? std::stoi(argv[1]) : 1;
        const int ranks = mpi::size();
        const bool rank0 = mpi::rank() == 0;
        Rng rng(7);
        std::vector<float> xm(4 * 10000), ym(4 * 10000), xl(784 * 2048);
        std::vector<std::int32_t> yl(2048);
        for (auto& v : xm) v = static_cast<float>(rng.normal());
        for (auto& v : ym) v = static_cast<float>(rng.normal());
        for (auto& v : xl) v = static_cast<float>(rng.normal());
        for (auto& v : yl) v = static_cast<std::int32_t>(rng.below(10));
        if (rank0) std::printf("%s\nranks=%d threads_per_rank=%d\n", build_report().c_str(), ranks, threads);

        struct Row {
            const char* model;
            std::size_t params, batch;
            double allreduce, step;
        };
        const Row rows[] = {
            {"tiny_mlp", TinyMLP::num_params, 10000, allreduce_us(TinyMLP::num_params + 1, 2000, 7),
             step_us<TinyMLP, SquaredError>(xm, ym, 10000, threads, 41)},
            {"lenet5", LeNet5::num_params, 2048, allreduce_us(LeNet5::num_params + 1, 200, 7),
             step_us<LeNet5, SoftmaxCrossEntropy>(xl, yl, 2048, threads, 15)},
            {"lenet5", LeNet5::num_params, 64, allreduce_us(LeNet5::num_params + 1, 200, 7),
             step_us<LeNet5, SoftmaxCrossEntropy>(xl, yl, 64, threads, 201)},
        };
        for (const Row& r : rows)
            if (rank0)
                std::printf("model=%s params=%zu bytes_allreduced=%zu batch=%zu allreduce_us=%.1f step_us=%.1f "
                            "allreduce_share=%.3f\n",
                            r.model, r.params, 4 * (r.params + 1), r.batch, r.allreduce, r.step, r.allreduce / r.step);
        return 0;
    });
}
