// A Conv and the MaxPool after it pull back as one, with the bits of the two pullbacks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_chain_conv_pool {

using namespace chainlet;

// A Conv followed by a MaxPool pulls back as one (Sequence::pulls_back_next: the Conv's pullback_from_rows
// with the MaxPool's cotangent_rows as its source, layer.hpp): the bits of the two layers' own pullbacks
// one after the other, adding into g and writing it, with and without dx, on chunks whose first
// convolution runs in bands (the pooling's cotangent then never written whole) and on others. The first
// convolution's 23 output rows leave one out of the 2 x 2 windows; the second pair has a dx to compute and
// 3 x 2 windows.
TEMPLATE_TEST_CASE("Chain: a Conv and the MaxPool after it pull back as one, with the bits of the two pullbacks",
                   "[chain][gradient]", float, double) {
    using T = TestType;
    using Net = Chain<Input<27, 28, 1>, Conv<5, 5, 6, ReLU>, MaxPool<2>, Conv<3, 3, 4, Softplus>, MaxPool<3, 2>, Flatten,
                      Dense<3>>;
    static_assert(Net::pulls_back_next<0, T>() && !Net::pulls_back_next<1, T>() && Net::pulls_back_next<2, T>() &&
                  !Net::pulls_back_next<3, T>() && !Net::pulls_back_next<4, T>());
    constexpr std::size_t W = simd::width<T>;
    const T nan = std::numeric_limits<T>::quiet_NaN();
    std::vector<T> p(Net::num_params);
    init_params<Net>(p, 5);
    for (const std::size_t n : {W, 2 * W, W + 3, std::size_t{1}}) {
        const auto x = test::random_vector<T>(Net::in_size * n, 40 + n), w = test::random_vector<T>(Net::out_size * n, 41 + n);
        const auto g0 = test::random_vector<T>(Net::num_params, 42);
        std::vector<T> y(Net::out_size * n), saved(Net::saved_per_sample * n);
        Net::forward(p.data(), x.data(), y.data(), saved.data(), n);
        for (const bool accumulate : {true, false})
            for (const bool with_dx : {false, true}) {
                INFO("n=" << n << " accumulate=" << accumulate << " dx=" << with_dx);
                auto run = [&](bool as_one) {
                    std::vector<T> g = accumulate ? g0 : std::vector<T>(g0.size(), nan), dy = w,
                                   dx(Net::in_size * n, nan), scratch(Net::scratch_per_sample * n, nan);
                    T* const dxp = with_dx ? dx.data() : nullptr;
                    if (as_one && accumulate) {
                        Net::pullback(p.data(), g.data(), x.data(), y.data(), saved.data(), scratch.data(), dy.data(), dxp, n);
                    } else if (as_one) {
                        Net::pullback_assign(p.data(), g.data(), x.data(), y.data(), saved.data(), scratch.data(), dy.data(),
                                             dxp, n);
                    } else {
                        // The layers' own pullbacks, last to first, with the chain's buffers.
                        [&]<std::size_t... I>(std::index_sequence<I...>) {
                            (([&] {
                                 constexpr std::size_t L = Net::num_layers - 1 - I;
                                 T* const buffer = scratch.data();
                                 T* dyl = L == Net::num_layers - 1 ? dy.data() : buffer + (L % 2) * Net::max_inner_width * n;
                                 T* dxl = L == 0 ? dxp : buffer + ((L - 1) % 2) * Net::max_inner_width * n;
                                 auto pull = [&]<bool add>() {
                                     detail::layer_pullback<add, typename Net::template layer<L>>(
                                         p.data() + Net::param_offset[L], g.data() + Net::param_offset[L],
                                         Net::template input<L>(x.data(), saved.data(), n),
                                         Net::template output<L>(y.data(), saved.data(), n),
                                         saved.data() + Net::saved_offset[L] * n,
                                         buffer + Net::layer_scratch_offset * n, dyl, dxl, n);
                                 };
                                 if (accumulate) pull.template operator()<true>();
                                 else pull.template operator()<false>();
                             }()),
                             ...);
                        }(std::make_index_sequence<Net::num_layers>{});
                    }
                    return std::pair{g, dx};
                };
                const auto [g_one, dx_one] = run(true);
                const auto [g_two, dx_two] = run(false);
                REQUIRE(g_one == g_two);
                if (with_dx) REQUIRE(dx_one == dx_two);
            }
    }
}

}  // namespace test_chain_conv_pool
