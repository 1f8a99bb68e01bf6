// A data-parallel job in which one rank fails; ctest (expect_failure.cmake) checks that mpirun exits
// non-zero, with the failed rank's message, within the timeout instead of hanging in a collective.
//   mpi_rank_failure mid-training   rank 1 throws from its loss at its 3rd step, while rank 0 waits
//                                   in that step's MPI_Allreduce
//   mpi_rank_failure bad-labels     rank 1's labels are out of range (its data is corrupt): it throws
//                                   before training while rank 0 waits in mpi::fit's first collective
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/mpi.hpp"

using namespace chainlet;
using Net = Chain<Input<2>, Dense<8, Tanh>, Dense<3>>;

namespace {

int calls = 0;  // value_and_gradient calls of FailingLoss on this rank

// Softmax cross-entropy that throws on rank 1's third call (losses are static, so the state is global).
struct FailingLoss : SoftmaxCrossEntropy {
    template <class T>
    static T value_and_gradient(const T* yhat, const std::int32_t* y, T* dyhat, std::size_t out, std::size_t n, T scale) {
        if (mpi::rank() == 1 && ++calls == 3) throw std::runtime_error("simulated failure in step 3");
        return SoftmaxCrossEntropy::value_and_gradient<T>(yhat, y, dyhat, out, n, scale);
    }
};

}  // namespace

int main(int argc, char** argv) {
    mpi::Session session(argc, argv);
    return mpi::run_or_abort(MPI_COMM_WORLD, [&] {
        const std::string mode = argc > 1 ? argv[1] : "";
        if (mode != "mid-training" && mode != "bad-labels")
            throw std::invalid_argument("expected mode mid-training or bad-labels, got '" + mode + "'");
        const std::size_t n = 256;
        std::vector<float> x(2 * n), p(Net::num_params);
        std::vector<std::int32_t> y(n);
        for (std::size_t s = 0; s < n; ++s) {
            x[2 * s] = static_cast<float>(s % 7) - 3;
            x[2 * s + 1] = static_cast<float>(s % 5) - 2;
            y[s] = static_cast<std::int32_t>(s % 3);
        }
        if (mode == "bad-labels" && mpi::rank() == 1) y[10] = 7;
        init_params<Net>(p, 1);
        Adam opt(1e-2f);
        FitOptions o;
        o.epochs = 5;
        o.batch = 32;
        o.threads = 1;
        if (mode == "mid-training") mpi::fit<Net>(MPI_COMM_WORLD, p, FailingLoss{}, x, y, opt, o);
        else mpi::fit<Net>(MPI_COMM_WORLD, p, SoftmaxCrossEntropy{}, x, y, opt, o);
        std::printf("rank %d: training finished, which it should not have\n", mpi::rank());
        return 0;
    });
}
