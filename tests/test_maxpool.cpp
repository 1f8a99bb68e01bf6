// MaxPool and Flatten: values against the definition, gradients against finite differences (double),
// deterministic handling of ties, the vector loops against scalar ones on odd sizes; MaxPool's and
// MaxPool1D's derivative-pass rules through the checker, alone and in chains.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "chainlet/chain.hpp"
#include "chainlet/layers/dense.hpp"
#include "chainlet/layers/flatten.hpp"
#include "chainlet/layers/maxpool.hpp"
#include "chainlet/layers/maxpool1d.hpp"
#include "support.hpp"

namespace test_maxpool {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;

namespace {
template <std::size_t H, std::size_t W, std::size_t C, std::size_t PH, std::size_t PW>
void check_pool() {
    using L = typename MaxPool<PH, PW>::template bound<Shape<H, W, C>>;
    for (std::size_t n : {1, 3, 17, 35}) {
        INFO("H=" << H << " W=" << W << " C=" << C << " n=" << n);
        // Random inputs have no ties, so finite differences are valid.
        REQUIRE(test::layer_gradient_error<L>(n, n) < 1e-6);
        const auto x = test::random_vector(L::in_size * n, n + 1);
        std::vector<double> y(L::out_size * n);
        L::forward(static_cast<const double*>(nullptr), x.data(), y.data(), static_cast<double*>(nullptr), n);
        for (std::size_t oy = 0; oy < L::OH; ++oy)
            for (std::size_t ox = 0; ox < L::OW; ++ox)
                for (std::size_t c = 0; c < C; ++c)
                    for (std::size_t s = 0; s < n; ++s) {
                        double m = -1e300;
                        for (std::size_t dy = 0; dy < PH; ++dy)
                            for (std::size_t dx = 0; dx < PW; ++dx)
                                m = std::max(m, x[(((oy * PH + dy) * W + ox * PW + dx) * C + c) * n + s]);
                        REQUIRE(y[((oy * L::OW + ox) * C + c) * n + s] == m);
                    }
    }
}
}  // namespace

TEST_CASE("MaxPool: values and gradients", "[maxpool][gradient]") {
    check_pool<4, 4, 1, 2, 2>();
    check_pool<7, 5, 3, 2, 2>();  // trailing row and column dropped
    check_pool<6, 9, 2, 3, 3>();
    check_pool<4, 6, 5, 2, 3>();
}

// The layer checker, which also holds cotangent_rows (by bands of input rows, as a convolution's
// pullback_from_rows asks for them) to the pullback's bits, in float and double.
TEST_CASE("MaxPool: layer check, cotangent_rows band by band", "[maxpool][gradient]") {
    LayerCheckOptions o;
    o.chunk_sizes = {1, 3, 16, 17};
    for (const auto& r : {check_layer<MaxPool<2>, Input<8, 6, 3>>(o), check_layer<MaxPool<2>, Input<7, 5, 2>>(o),
                          check_layer<MaxPool<3, 2>, Input<11, 6, 2>>(o)}) {
        INFO(r.report());
        REQUIRE(r.passed());
        REQUIRE(r.jet_rule_checked);  // the derivative passes' rules, against finite differences too
        REQUIRE(r.hvp_rule_checked);
    }
}

TEST_CASE("MaxPool and MaxPool1D in a chain: the derivative passes' rules against finite differences",
          "[maxpool][gradient]") {
    using Image = Chain<Input<6, 5, 2>, MaxPool<2>, Flatten, Dense<5, Tanh>, Dense<1>>;
    using Sequence = Chain<Input<9, 3>, MaxPool1D<2>, Flatten, Dense<4, Softplus>, Dense<2>>;
    for (const auto& r : {check_bound_layer<Image::sequence>(), check_bound_layer<Sequence::sequence>(),
                          check_layer<MaxPool1D<3>, Input<10, 2>>()}) {
        INFO(r.report());
        REQUIRE(r.passed());
        REQUIRE(r.jet_rule_checked);
        REQUIRE(r.hvp_rule_checked);
    }
}

// MaxPool<2> whose jet pullback passes 1.5 times the cotangent back: the checker must fail it, its
// second look at entries near a tie included.
struct WrongJetPullback {
    template <class InShape>
    struct bound : MaxPool<2>::bound<InShape> {
        using base = typename MaxPool<2>::template bound<InShape>;
        struct jet_rule : base::template jet_rule_for<bound> {
            template <class T>
            static void pullback(const T* p, T* g, const T* x, const T* sv, T* scr, T* ybar, T* xbar, std::size_t m,
                                 const JetColumns& cols) {
                base::template jet_rule_for<bound>::pullback(p, g, x, sv, scr, ybar, xbar, m, cols);
                if (xbar)
                    for (std::size_t i = 0; i < base::in_size * cols.C * m; ++i) xbar[i] *= T(1.5);
            }
        };
        using hvp_rule = typename base::template hvp_rule_for<bound>;
        static std::string describe() { return "WrongJetPullback"; }
    };
};

TEST_CASE("MaxPool: the checker fails a wrong jet pullback", "[maxpool][gradient]") {
    const auto r = check_layer<WrongJetPullback, Input<8, 6, 3>>();
    INFO(r.report());
    REQUIRE_FALSE(r.passed());
    REQUIRE(r.report().find("jet_rule: the pullback's input cotangent differs") != std::string::npos);
}

// The rules' choice at a tie and at a NaN is the pullback's: the HVP rule's xbar and R xbar against the
// layer's pullback, its Ry against R x at that position.
TEST_CASE("MaxPool: the derivative rules choose the pullback's position at ties and NaN", "[maxpool]") {
    using B = MaxPool<2>::bound<Shape<2, 2, 1>>;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (const std::vector<double>& x : {std::vector<double>{1, 1, 0, 1}, std::vector<double>{0, 2, 2, 1},
                                         std::vector<double>{1, 3, nan, 3}, std::vector<double>{nan, 1, nan, 0}}) {
        const std::vector<double> rx = {5, 6, 7, 8};
        double y = 0, ry = 0, dy = 1, ybar = 1, rybar = 2;
        std::vector<double> dx(4), xbar(4), rxbar(4);
        B::forward(static_cast<const double*>(nullptr), x.data(), &y, static_cast<double*>(nullptr), 1);
        B::pullback(static_cast<const double*>(nullptr), static_cast<double*>(nullptr), x.data(), &y,
                    static_cast<double*>(nullptr), static_cast<double*>(nullptr), &dy, dx.data(), 1);
        double hy = 0;
        B::hvp_rule::forward(static_cast<const double*>(nullptr), static_cast<const double*>(nullptr), x.data(),
                             rx.data(), &hy, &ry, static_cast<double*>(nullptr), 1);
        B::hvp_rule::pullback(static_cast<const double*>(nullptr), static_cast<const double*>(nullptr),
                              static_cast<double*>(nullptr), static_cast<double*>(nullptr), x.data(), rx.data(),
                              static_cast<const double*>(nullptr), static_cast<double*>(nullptr), &ybar, &rybar,
                              xbar.data(), rxbar.data(), 1);
        const std::size_t at = static_cast<std::size_t>(std::find(dx.begin(), dx.end(), 1.0) - dx.begin());
        REQUIRE(at < 4);
        REQUIRE(std::count(dx.begin(), dx.end(), 0.0) == 3);
        REQUIRE(((std::isnan(hy) && std::isnan(y)) || hy == y));
        REQUIRE(xbar == dx);
        for (std::size_t i = 0; i < 4; ++i) REQUIRE(rxbar[i] == 2 * dx[i]);
        REQUIRE(ry == rx[at]);
    }
}

TEST_CASE("MaxPool: a tie sends the whole cotangent to the first maximal position", "[maxpool]") {
    using L = MaxPool<2, 2>::bound<Shape<2, 2, 1>>;
    for (std::size_t n : {1, 16, 19}) {  // scalar, vector and tail paths
        std::vector<float> x(4 * n), y(n), dy(n, 1.5f), dx(4 * n, -7.0f);
        for (std::size_t s = 0; s < n; ++s) {
            x[0 * n + s] = 1.0f;  // (0, 0)
            x[1 * n + s] = 3.0f;  // (0, 1)  first maximum
            x[2 * n + s] = 3.0f;  // (1, 0)  tie
            x[3 * n + s] = 2.0f;
        }
        L::forward(static_cast<const float*>(nullptr), x.data(), y.data(), static_cast<float*>(nullptr), n);
        L::pullback(static_cast<const float*>(nullptr), static_cast<float*>(nullptr), x.data(), y.data(),
                    static_cast<float*>(nullptr), static_cast<float*>(nullptr), dy.data(), dx.data(), n);
        for (std::size_t s = 0; s < n; ++s) {
            REQUIRE(y[s] == 3.0f);
            REQUIRE(dx[0 * n + s] == 0.0f);
            REQUIRE(dx[1 * n + s] == 1.5f);
            REQUIRE(dx[2 * n + s] == 0.0f);
            REQUIRE(dx[3 * n + s] == 0.0f);
        }
    }
}

// PyTorch's max_pool2d gives NaN for a window holding a NaN anywhere; the hardware max alone kept a NaN
// only in the window's last position.
TEMPLATE_TEST_CASE("MaxPool: a NaN anywhere in a window gives NaN, and the cotangent goes to the first NaN",
                   "[maxpool]", float, double) {
    using T = TestType;
    using L = MaxPool<2, 2>::bound<Shape<2, 2, 1>>;
    const T nan = std::numeric_limits<T>::quiet_NaN();
    for (std::size_t n : {1, 16, 19, 37})  // scalar, vector and tail paths, in float and double
        for (std::size_t first = 0; first < 4; ++first)
            for (std::size_t second : {first, std::size_t{3}}) {  // one NaN, or a second one last
                std::vector<T> x(4 * n), y(n), dy(n, T(1.5)), dx(4 * n, T(-7));
                for (std::size_t s = 0; s < n; ++s)
                    for (std::size_t i = 0; i < 4; ++i) x[i * n + s] = i == first || i == second ? nan : T(i + 1);
                L::forward(static_cast<const T*>(nullptr), x.data(), y.data(), static_cast<T*>(nullptr), n);
                L::pullback(static_cast<const T*>(nullptr), static_cast<T*>(nullptr), x.data(), y.data(),
                            static_cast<T*>(nullptr), static_cast<T*>(nullptr), dy.data(), dx.data(), n);
                INFO("n=" << n << " NaN at " << first << " and " << second);
                for (std::size_t s = 0; s < n; ++s) {
                    REQUIRE(std::isnan(y[s]));
                    for (std::size_t i = 0; i < 4; ++i) REQUIRE(dx[i * n + s] == (i == first ? T(1.5) : T(0)));
                }
            }
}

TEST_CASE("MaxPool: float vector path equals the double computation", "[maxpool][kernel]") {
    using L = MaxPool<2, 2>::bound<Shape<6, 6, 3>>;
    for (std::size_t n : {1, 5, 16, 21}) {
        const auto xd = test::random_vector(L::in_size * n, 3);
        const std::vector<float> xf(xd.begin(), xd.end());
        std::vector<float> yf(L::out_size * n), dyf(L::out_size * n, 1.0f), dxf(L::in_size * n);
        std::vector<double> yd(L::out_size * n), dyd(L::out_size * n, 1.0), dxd(L::in_size * n);
        L::forward(static_cast<const float*>(nullptr), xf.data(), yf.data(), static_cast<float*>(nullptr), n);
        L::forward(static_cast<const double*>(nullptr), xd.data(), yd.data(), static_cast<double*>(nullptr), n);
        L::pullback(static_cast<const float*>(nullptr), static_cast<float*>(nullptr), xf.data(), yf.data(),
                    static_cast<float*>(nullptr), static_cast<float*>(nullptr), dyf.data(), dxf.data(), n);
        L::pullback(static_cast<const double*>(nullptr), static_cast<double*>(nullptr), xd.data(), yd.data(),
                    static_cast<double*>(nullptr), static_cast<double*>(nullptr), dyd.data(), dxd.data(), n);
        for (std::size_t i = 0; i < yd.size(); ++i) REQUIRE(yf[i] == static_cast<float>(yd[i]));
        for (std::size_t i = 0; i < dxd.size(); ++i) REQUIRE(dxf[i] == static_cast<float>(dxd[i]));
    }
}

TEST_CASE("Flatten: keeps the order, gradient is the identity", "[flatten][gradient]") {
    using L = Flatten::bound<Shape<3, 4, 2>>;
    STATIC_REQUIRE(std::is_same_v<L::out_shape, Shape<24>>);
    REQUIRE(test::layer_gradient_error<L>(5, 1) < 1e-7);
}

}  // namespace test_maxpool
