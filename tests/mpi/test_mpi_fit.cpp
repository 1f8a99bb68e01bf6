// chainlet::mpi under mpirun (any number of ranks; ctest runs it on 2 and 3): data-parallel fit keeps
// the parameters bit-identical on every rank and matches a 1-process fit over the same global batches;
// it stays consistent when a rank's share of a batch is empty or holds a NaN, and refuses ranks that
// disagree on the data; ensemble gathers every member's result on rank 0 in member order.
//
// Every verdict is taken from gathered values, so all ranks pass or fail a check together and keep
// making the same collective calls.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/mpi.hpp"
#include "support.hpp"

using namespace chainlet;
using Net = Chain<Input<3>, Dense<16, Tanh>, Dense<8, Tanh>, Dense<2>>;

namespace {

struct Data {
    std::vector<float> x, y;
};
// y = (sin x0 + x1 x2, cos x1 - x0), noise-free.
Data make_data(std::size_t n, std::uint64_t seed) {
    Data d{test::random_vector<float>(3 * n, seed), std::vector<float>(2 * n)};
    for (std::size_t s = 0; s < n; ++s) {
        const float* x = &d.x[3 * s];
        d.y[2 * s] = std::sin(x[0]) + x[1] * x[2];
        d.y[2 * s + 1] = std::cos(x[1]) - x[0];
    }
    return d;
}

FitOptions options(std::size_t epochs, std::size_t batch) {
    FitOptions o;
    o.epochs = epochs;
    o.batch = batch;
    o.seed = 5;
    o.threads = 1;
    return o;
}

// Trains from init seed 3 with fit (comm null) or mpi::fit on comm; returns the parameters.
template <class Opt>
std::vector<float> train(MPI_Comm comm, const Data& d, Opt opt, const FitOptions& o, std::vector<double>* losses = nullptr) {
    std::vector<float> p(Net::num_params);
    init_params<Net>(p, 3);
    FitOptions oo = o;
    if (losses) oo.on_step = [&](const StepInfo& s) { losses->push_back(s.loss); };
    if (comm == MPI_COMM_NULL) fit<Net>(p, SquaredError{}, d.x, d.y, opt, oo);
    else mpi::fit<Net>(comm, p, SquaredError{}, d.x, d.y, opt, oo);
    return p;
}

bool all_equal(const std::vector<std::uint64_t>& v) {
    for (auto e : v)
        if (e != v[0]) return false;
    return true;
}

// The largest value over the ranks (so every rank checks the same number).
double max_over_ranks(double v) {
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return v;
}

}  // namespace

TEST_CASE("mpi::fit: every rank ends with bit-identical parameters, and the model learns", "[mpi]") {
    const auto d = make_data(1000, 1);  // batches of 64: 15 full and one of 40, cut unevenly over 3 ranks
    const auto p = train(MPI_COMM_WORLD, d, Adam(1e-2f), options(20, 64));
    const auto sums = mpi::checksums<float>(MPI_COMM_WORLD, p);
    INFO("ranks: " << sums.size());
    REQUIRE(all_equal(sums));
    std::vector<float> p0(Net::num_params), g(Net::num_params);
    init_params<Net>(p0, 3);
    const float before = value_and_gradient<Net>(p0, g, d.x, d.y, SquaredError{});
    const float after = value_and_gradient<Net>(p, g, d.x, d.y, SquaredError{});
    REQUIRE(after < 0.1f * before);
}

TEST_CASE("mpi::fit matches a 1-process fit over the same global batches to 1e-5", "[mpi]") {
    // 961 = 15 * 64 + 1: the last batch has one sample, so some ranks compute nothing for it.
    const auto d = make_data(961, 2);
    SECTION("Adam, shuffled batches of 64, 3 epochs") {
        std::vector<double> l_ref, l_mpi;
        const auto ref = train(MPI_COMM_NULL, d, Adam(1e-2f), options(3, 64), &l_ref);
        const auto got = train(MPI_COMM_WORLD, d, Adam(1e-2f), options(3, 64), &l_mpi);
        const double err = max_over_ranks(test::max_rel_diff(got, ref));
        INFO("largest parameter difference relative to max(|p|, 1): " << err);
        REQUIRE(err < 1e-5);
        if (mpi::rank() == 0) {  // on_step runs on rank 0 only, with the loss of the whole batch
            REQUIRE(l_mpi.size() == l_ref.size());
            REQUIRE(test::max_rel_diff(l_mpi, l_ref) < 1e-5);
        }
    }
    SECTION("SGD with momentum, full batch, 50 steps") {
        const auto ref = train(MPI_COMM_NULL, d, SGD(0.05f, 0.9f), options(50, 0));
        const auto got = train(MPI_COMM_WORLD, d, SGD(0.05f, 0.9f), options(50, 0));
        const double err = max_over_ranks(test::max_rel_diff(got, ref));
        INFO("largest parameter difference relative to max(|p|, 1): " << err);
        REQUIRE(err < 1e-5);
        REQUIRE(got != std::vector<float>(Net::num_params));
    }
}

TEST_CASE("mpi::fit with Dropout matches a 1-process fit to 1e-5: the masks do not depend on the ranks", "[mpi][dropout]") {
    // Dropout keys its masks by the sample's index in the whole batch (fit passes each rank's offset),
    // so every rank count drops the same values; other masks would move the parameters far apart.
    using DropNet = Chain<Input<3>, Dense<16, Tanh>, Dropout<30>, Dense<8, Tanh>, Dropout<20>, Dense<2>>;
    const auto d = make_data(961, 4);
    auto run = [&](MPI_Comm comm) {
        std::vector<float> p(DropNet::num_params);
        init_params<DropNet>(p, 3);
        Adam opt(1e-2f);
        if (comm == MPI_COMM_NULL) fit<DropNet>(p, SquaredError{}, d.x, d.y, opt, options(3, 64));
        else mpi::fit<DropNet>(comm, p, SquaredError{}, d.x, d.y, opt, options(3, 64));
        return p;
    };
    const auto ref = run(MPI_COMM_NULL), got = run(MPI_COMM_WORLD);
    const double err = max_over_ranks(test::max_rel_diff(got, ref));
    INFO("largest parameter difference relative to max(|p|, 1): " << err);
    REQUIRE(err < 1e-5);
}

TEST_CASE("mpi::fit on a single rank is fit, bit for bit", "[mpi]") {
    const auto d = make_data(500, 3);
    const auto ref = train(MPI_COMM_NULL, d, Adam(1e-2f), options(4, 50));
    const auto got = train(MPI_COMM_SELF, d, Adam(1e-2f), options(4, 50));
    REQUIRE(got == ref);
}

TEST_CASE("mpi::fit starts every rank from rank 0's parameters", "[mpi]") {
    const auto d = make_data(300, 4);
    std::vector<float> p(Net::num_params);
    init_params<Net>(p, 100 + static_cast<std::uint64_t>(mpi::rank()));  // a different start on each rank
    Adam opt(1e-2f);
    mpi::fit<Net>(MPI_COMM_WORLD, p, SquaredError{}, d.x, d.y, opt, options(2, 32));
    REQUIRE(all_equal(mpi::checksums<float>(MPI_COMM_WORLD, p)));
    std::vector<float> ref(Net::num_params);
    init_params<Net>(ref, 100);
    Adam opt_ref(1e-2f);
    fit<Net>(ref, SquaredError{}, d.x, d.y, opt_ref, options(2, 32));
    REQUIRE(max_over_ranks(test::max_rel_diff(p, ref)) < 1e-5);
}

TEST_CASE("mpi::fit: a NaN in one rank's share stops every rank at the same step", "[mpi][errors]") {
    auto d = make_data(256, 5);
    d.x[3 * 255] = std::numeric_limits<float>::quiet_NaN();  // the last row: in the last rank's slice
    std::vector<float> p(Net::num_params);
    init_params<Net>(p, 3);
    Adam opt(1e-2f);
    std::string message;
    try {
        mpi::fit<Net>(MPI_COMM_WORLD, p, SquaredError{}, d.x, d.y, opt, options(1, 0));
    } catch (const std::runtime_error& e) {
        message = e.what();
    }
    const auto thrown = mpi::checksums<char>(MPI_COMM_WORLD, std::span<const char>(message.data(), message.size()));
    INFO("rank " << mpi::rank() << ": " << message);
    REQUIRE(message.find("non-finite at epoch 1, step 1") != std::string::npos);
    REQUIRE(all_equal(thrown));  // the same message on every rank
}

TEST_CASE("mpi::fit refuses ranks that pass different data or options, on every rank", "[mpi][errors]") {
    const auto d = make_data(200, 6);
    std::vector<float> p(Net::num_params);
    init_params<Net>(p, 3);
    Adam opt(1e-2f);
    auto o = options(2, 32);
    if (mpi::size() > 1 && mpi::rank() == 1) o.batch = 40;
    if (mpi::size() > 1)
        REQUIRE_THROWS_WITH(mpi::fit<Net>(MPI_COMM_WORLD, p, SquaredError{}, d.x, d.y, opt, o),
                            Catch::Contains("batch differs between ranks: 32 on rank 0, 40 on rank 1"));
}

namespace {
struct Member {
    std::uint64_t index, checksum;
    double loss;
};
Member run_member(std::size_t i) {
    const auto d = make_data(200, 10 + i);
    std::vector<float> p(Net::num_params), g(Net::num_params);
    init_params<Net>(p, i);
    Adam opt(1e-2f);
    fit<Net>(p, SquaredError{}, d.x, d.y, opt, options(3, 50));
    return {i, checksum(std::span<const float>(p)), value_and_gradient<Net>(p, g, d.x, d.y, SquaredError{})};
}
}  // namespace

TEST_CASE("mpi::ensemble gathers every member's result on rank 0, in member order", "[mpi][ensemble]") {
    for (std::size_t members : {1, 2, 5}) {
        std::vector<int> ran_on(members, -1);
        const auto results = mpi::ensemble<Member>(MPI_COMM_WORLD, members, [&](std::size_t i) {
            ran_on[i] = mpi::rank();
            return run_member(i);
        });
        for (std::size_t i = 0; i < members; ++i) {  // round robin: member i on rank i mod P, and only there
            const bool mine = static_cast<int>(i % static_cast<std::size_t>(mpi::size())) == mpi::rank();
            CHECK(ran_on[i] == (mine ? mpi::rank() : -1));
        }
        if (mpi::rank() != 0) {
            REQUIRE(results.empty());
            continue;
        }
        REQUIRE(results.size() == members);
        for (std::size_t i = 0; i < members; ++i) {
            const Member expected = run_member(i);  // recomputed here, on rank 0
            CHECK(results[i].index == i);
            CHECK(results[i].checksum == expected.checksum);
            CHECK(results[i].loss == expected.loss);
        }
    }
}

int main(int argc, char** argv) {
    mpi::Session session(argc, argv);
    return Catch::Session().run(argc, argv);
}
