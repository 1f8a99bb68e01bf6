// AvgPool, GlobalAvgPool, MaxPool1D and AvgPool1D: the layer checker (finite differences in double, the
// contract's rules, float against double) on odd sizes and chunks that take the vector loops and their
// scalar tails, values against the definitions, shape rules and architecture text.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "chainlet/layers/avgpool.hpp"
#include "chainlet/layers/avgpool1d.hpp"
#include "chainlet/layers/global_avgpool.hpp"
#include "chainlet/layers/maxpool1d.hpp"
#include "support.hpp"

namespace test_pooling {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;

namespace {

template <class L, class In>
void require_layer_check() {
    test::require_layer_check<L, In>(test::odd_chunk_options());
}

template <class B>
std::vector<double> run_forward(const std::vector<double>& x, std::size_t n) {
    std::vector<double> y(B::out_size * n);
    B::forward(static_cast<const double*>(nullptr), x.data(), y.data(), static_cast<double*>(nullptr), n);
    return y;
}

// Mean (avg) or maximum over the windows of an (H, W, C) image straight from the definition.
template <std::size_t H, std::size_t W, std::size_t C, std::size_t PH, std::size_t PW>
std::vector<double> pool_reference(const std::vector<double>& x, std::size_t n, bool avg) {
    const std::size_t OH = H / PH, OW = W / PW;
    std::vector<double> y(OH * OW * C * n);
    for (std::size_t oy = 0; oy < OH; ++oy)
        for (std::size_t ox = 0; ox < OW; ++ox)
            for (std::size_t c = 0; c < C; ++c)
                for (std::size_t s = 0; s < n; ++s) {
                    double acc = avg ? 0 : -1e300;
                    for (std::size_t dy = 0; dy < PH; ++dy)
                        for (std::size_t dx = 0; dx < PW; ++dx) {
                            const double v = x[(((oy * PH + dy) * W + ox * PW + dx) * C + c) * n + s];
                            acc = avg ? acc + v : std::max(acc, v);
                        }
                    y[((oy * OW + ox) * C + c) * n + s] = avg ? acc / (PH * PW) : acc;
                }
    return y;
}

}  // namespace

TEST_CASE("AvgPool: layer check, values and shape", "[avgpool][gradient]") {
    require_layer_check<AvgPool<2>, Input<4, 4, 1>>();
    require_layer_check<AvgPool<2, 2>, Input<7, 5, 3>>();  // trailing row and column dropped
    require_layer_check<AvgPool<3, 2>, Input<6, 9, 2>>();
    STATIC_REQUIRE(std::is_same_v<AvgPool<3, 2>::bound<Shape<7, 9, 2>>::out_shape, Shape<2, 4, 2>>);
    using B = AvgPool<3, 2>::bound<Shape<7, 9, 2>>;
    for (std::size_t n : {1, 16, 19}) {
        const auto x = test::random_vector(B::in_size * n, n);
        REQUIRE(test::max_rel_diff(run_forward<B>(x, n), pool_reference<7, 9, 2, 3, 2>(x, n, true)) < 1e-14);
    }
    REQUIRE(B::describe() == "AvgPool[3x2]");
}

TEST_CASE("GlobalAvgPool: images and sequences, layer check and values", "[globalavgpool][gradient]") {
    require_layer_check<GlobalAvgPool, Input<5, 3, 4>>();
    require_layer_check<GlobalAvgPool, Input<7, 3>>();
    require_layer_check<GlobalAvgPool, Input<1, 6>>();
    using B = GlobalAvgPool::bound<Shape<5, 3, 4>>;
    STATIC_REQUIRE(std::is_same_v<B::out_shape, Shape<4>>);
    STATIC_REQUIRE(std::is_same_v<GlobalAvgPool::bound<Shape<9, 2>>::out_shape, Shape<2>>);
    for (std::size_t n : {1, 17}) {
        const auto x = test::random_vector(B::in_size * n, 3);
        // the mean over all 15 pixels is a 5 x 3 average pool of the whole image
        REQUIRE(test::max_rel_diff(run_forward<B>(x, n), pool_reference<5, 3, 4, 5, 3>(x, n, true)) < 1e-14);
    }
}

TEST_CASE("MaxPool1D and AvgPool1D: layer check, values, shape", "[pool1d][gradient]") {
    require_layer_check<MaxPool1D<2>, Input<9, 3>>();  // trailing position dropped
    require_layer_check<MaxPool1D<3>, Input<12, 1>>();
    require_layer_check<AvgPool1D<2>, Input<9, 3>>();
    require_layer_check<AvgPool1D<4>, Input<8, 5>>();
    using M = MaxPool1D<3>::bound<Shape<10, 2>>;
    using A = AvgPool1D<3>::bound<Shape<10, 2>>;
    STATIC_REQUIRE(std::is_same_v<M::out_shape, Shape<3, 2>>);
    STATIC_REQUIRE(std::is_same_v<A::out_shape, Shape<3, 2>>);
    for (std::size_t n : {1, 17}) {
        const auto x = test::random_vector(M::in_size * n, 4);
        // a sequence (L, C) is the image (L, 1, C)
        REQUIRE(run_forward<M>(x, n) == pool_reference<10, 1, 2, 3, 1>(x, n, false));
        REQUIRE(test::max_rel_diff(run_forward<A>(x, n), pool_reference<10, 1, 2, 3, 1>(x, n, true)) < 1e-14);
    }
    REQUIRE(M::describe() == "MaxPool1D[3]");
    REQUIRE(A::describe() == "AvgPool1D[3]");
}

}  // namespace test_pooling
