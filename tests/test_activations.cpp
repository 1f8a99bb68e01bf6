// Each activation: its vector form against its scalar form on odd lengths, its value against the
// textbook formula, and its hand-written derivative against finite differences in double.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "chainlet/activations.hpp"
#include "chainlet/kernels/elementwise.hpp"
#include "support.hpp"

namespace test_activations {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;
using LeakySlope02 = LeakyReLU<1, 5>;  // an alias: a comma inside a Catch macro argument splits it
using Sin30 = Sin<30>;

namespace {

double textbook(const char* name, double z) {
    const std::string n = name;
    if (n == "identity") return z;
    if (n == "relu") return z > 0 ? z : 0;
    if (n == "tanh") return std::tanh(z);
    if (n == "sigmoid") return 1 / (1 + std::exp(-z));
    if (n == "softplus") return std::log(1 + std::exp(z));
    if (n == "elu") return z > 0 ? z : std::exp(z) - 1;
    if (n == "leaky_relu(1/100)") return z > 0 ? z : 0.01 * z;
    if (n == "leaky_relu(1/5)") return z > 0 ? z : 0.2 * z;
    if (n == "silu") return z / (1 + std::exp(-z));
    if (n == "gelu_erf") return 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)));
    if (n == "sin(1/1)") return std::sin(z);
    if (n == "sin(30/1)") return std::sin(30 * z);
    return 0.5 * z * (1 + std::tanh(std::sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)));  // gelu
}

template <class Act, class T>
void vector_matches_scalar() {
    for (std::size_t n : {1, 3, 7, 17, 33, 100}) {
        auto z = test::random_vector<T>(n, n, 3.0);
        std::vector<T> y(n), dy = test::random_vector<T>(n, n + 7);
        // value: the vector loop of gemm_nn's epilogue is Act::value on a batch; compare lane by lane.
        using V = simd::vec<T>;
        constexpr std::size_t W = simd::width<T>;
        std::size_t i = 0;
        for (; i + W <= n; i += W) simd::storev(&y[i], Act::value(simd::loadv<V>(&z[i])));
        for (; i < n; ++i) y[i] = Act::value(z[i]);
        for (std::size_t j = 0; j < n; ++j) REQUIRE(y[j] == Approx(Act::value(z[j])).epsilon(1e-6).margin(1e-7));
        const auto& s = Act::derivative_from_output ? y : z;
        auto d1 = dy, d2 = dy;
        kernels::activation_pullback<Act>(d1.data(), s.data(), n);
        kernels::activation_pullback_reference<Act>(d2.data(), s.data(), n);
        for (std::size_t j = 0; j < n; ++j) REQUIRE(d1[j] == Approx(d2[j]).epsilon(1e-5).margin(1e-6));
    }
}

template <class Act>
void derivative_matches_finite_differences() {
    const auto z = test::random_vector(200, 11, 3.0);
    for (double zi : z) {
        if (std::abs(zi) < 1e-4) continue;  // the kink of ReLU
        const double y = Act::value(zi);
        REQUIRE(y == Approx(textbook(Act::name, zi)).epsilon(1e-12).margin(1e-12));
        const double h = 1e-6;
        const double fd = (Act::value(zi + h) - Act::value(zi - h)) / (2 * h);
        const double d = Act::pullback(1.0, Act::derivative_from_output ? y : zi);
        REQUIRE(d == Approx(fd).epsilon(1e-6).margin(1e-8));
    }
}

}  // namespace

TEMPLATE_TEST_CASE("activation: vector form matches scalar form", "[activation]", Identity, ReLU, Tanh, Sigmoid,
                   Softplus, GELU, ELU, LeakyReLU<>, LeakySlope02, SiLU, GELUExact, Sin<>, Sin30) {
    vector_matches_scalar<TestType, float>();
    vector_matches_scalar<TestType, double>();
}

TEMPLATE_TEST_CASE("activation: value and derivative (double, finite differences)", "[activation][gradient]",
                   Identity, ReLU, Tanh, Sigmoid, Softplus, GELU, ELU, LeakyReLU<>, LeakySlope02, SiLU, GELUExact, Sin<>, Sin30) {
    derivative_matches_finite_differences<TestType>();
}

// ELU's f' = e^z for z < 0: in float, within a few ulp of the double e^z far into the tail, where
// y + 1 (y = e^z - 1 rounded) would have kept almost none of it.
TEST_CASE("activation: ELU's float derivative keeps its relative accuracy for z << 0", "[activation]") {
    double worst = 0;
    for (float z = -20.0f; z < 0.0f; z += 0.01f) {
        const double exact = std::exp(static_cast<double>(z));
        std::vector<float> d(simd::width<float> + 1, 1.0f), zs(d.size(), z);
        kernels::activation_pullback<ELU>(d.data(), zs.data(), d.size());  // a vector and the scalar tail
        for (float v : d) worst = test::worse(worst, std::abs(static_cast<double>(v) - exact) / exact);
    }
    INFO("worst relative error " << worst);
    REQUIRE(worst < 1e-6);
}

TEST_CASE("activation: fast float tanh stays within 2e-6 of std::tanh", "[activation]") {
    using V = simd::vec<float>;
    double worst = 0;
    for (float z = -12.0f; z <= 12.0f; z += 0.001f) {
        float lanes[simd::width<float>];
        simd::storev(lanes, simd::tanh(V(z)));
        worst = test::worse(worst, std::abs(static_cast<double>(lanes[0]) - std::tanh(static_cast<double>(z))));
        worst = test::worse(worst, std::abs(static_cast<double>(simd::tanh(z)) - std::tanh(static_cast<double>(z))));
    }
    REQUIRE(worst < 2e-6);
}

// The bound of the float tanh's error in units in the last place, by its form (simd::tanh_from_table).
// Measured worst over every third float of [0, 12]: the table's 2.84 ulp in the Release build, 2.90 in a
// -O1 build (whose vector FMAs round twice); the rational's 5.2 (4.4 on this test's points).
constexpr double tanh_ulp_bound = simd::tanh_from_table ? 3.5 : 8.0;

namespace {
// |got - tanh z| in units in the last place of the float nearest to |tanh z|.
double tanh_ulp_error(float z, float got) {
    const double exact = std::tanh(static_cast<double>(z));
    const float e = static_cast<float>(std::abs(exact));
    return std::abs(static_cast<double>(got) - exact) / static_cast<double>(std::nextafter(e, 2.0f) - e);
}
}  // namespace

// The same in units in the last place of the float result, over every float magnitude that matters:
// tiny arguments (where tanh z = z), the bend around 1, and saturation; for the vector lanes and for
// the scalar form.
TEST_CASE("activation: fast float tanh is within its ulp bound of std::tanh in vector and scalar form", "[activation]") {
    using V = simd::vec<float>;
    double worst = 0;
    float at = 0;
    auto check = [&](float z, float got) {
        const double err = tanh_ulp_error(z, got);
        if (err > worst) worst = err, at = z;
    };
    for (float z = 1e-30f; z < 12.0f; z *= 1.0001f)  // geometric: ~8e5 points, every binade
        for (float s : {z, -z}) {
            float lanes[simd::width<float>];
            simd::storev(lanes, simd::tanh(V(s)));
            check(s, lanes[0]);
            check(s, simd::tanh(s));
        }
    check(0.0f, simd::tanh(0.0f));
    INFO("worst " << worst << " ulp at z = " << at << ", bound " << tanh_ulp_bound);
    REQUIRE(worst <= tanh_ulp_bound);
}

// The table behind the float tanh holds tanh(k / 2) rounded to float, the nearest float to the exact value.
TEST_CASE("activation: the float tanh's table holds tanh(k / 2) rounded to float", "[activation]") {
    for (int k = 0; k < 32; ++k) {
        INFO("k = " << k);
        REQUIRE(simd::detail::tanh_of_halves[k] == static_cast<float>(std::tanh(k / 2.0)));
    }
}

// At the joins of the table's form, where b = |z| - a changes sign, and at its clamp: both sides of every
// multiple of 1/4 from 0 to 16 are within the bound above, in vector and scalar form.
TEST_CASE("activation: fast float tanh is continuous across its table's joins", "[activation]") {
    using V = simd::vec<float>;
    double worst = 0;
    float at = 0;
    for (int q = 1; q <= 64; ++q) {
        float z = q / 4.0f;
        for (int i = 0; i < 8; ++i) z = std::nextafter(z, 0.0f);
        for (int i = 0; i < 16; ++i, z = std::nextafter(z, 20.0f))
            for (float s : {z, -z}) {
                float lanes[simd::width<float>];
                simd::storev(lanes, simd::tanh(V(s)));
                for (float got : {lanes[0], simd::tanh(s)}) {
                    const double err = tanh_ulp_error(s, got);
                    if (err > worst) worst = err, at = s;
                }
            }
    }
    INFO("worst " << worst << " ulp at z = " << at << ", bound " << tanh_ulp_bound);
    REQUIRE(worst <= tanh_ulp_bound);
}

// |tanh z| <= 1 for every float from 6 to 10, where the exact value rounds to 1 or just below it: a
// rounding above 1 would make the pullback's 1 - y^2 negative (a clamp at 8.1 instead of 8 did that).
TEST_CASE("activation: fast float tanh never leaves [-1, 1], in vector and scalar form", "[activation]") {
    // Every float in [6, 10] (and the last vector's few beyond), each in some lane of a vector and alone.
    using V = simd::vec<float>;
    constexpr std::size_t W = simd::width<float>;
    float worst = 0, at = 0;
    for (float z = 6.0f; z <= 10.0f;) {
        float in[W], out[W];
        for (auto& e : in) e = z, z = std::nextafter(z, 11.0f);
        for (float sign : {1.0f, -1.0f}) {
            for (auto& e : in) e = sign * std::abs(e);
            simd::storev(out, simd::tanh(simd::loadv<V>(in)));
            for (std::size_t l = 0; l < W; ++l)
                for (float got : {out[l], simd::tanh(in[l])})
                    if (std::abs(got) > worst) worst = std::abs(got), at = in[l];
        }
    }
    INFO("largest |tanh| " << worst << " at z = " << at);
    REQUIRE(worst <= 1.0f);
}

TEST_CASE("activation: fast float tanh keeps NaN and saturates at infinity, in vector and scalar form", "[activation]") {
    using V = simd::vec<float>;
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    float lanes[simd::width<float>];
    simd::storev(lanes, simd::tanh(V(nan)));
    REQUIRE(std::isnan(lanes[0]));  // was 1 before the clamp took its bound first
    REQUIRE(std::isnan(simd::tanh(nan)));
    // The table's form: exactly +-1, since |z| is clamped to 15.5, whose table entry is 1, and (1 + tanh b) /
    // (1 + 1 tanh b) rounds its numerator and denominator alike (in the -O1 sanitizer build too, whose
    // vector FMAs round twice). The rational's: +-1 to within its accuracy (its clamp at 8 gives tanh 8).
    const float tolerance = simd::tanh_from_table ? 0.0f : 2.5e-7f;
    simd::storev(lanes, simd::tanh(V(inf)));
    REQUIRE(std::abs(lanes[0] - 1.0f) <= tolerance);
    simd::storev(lanes, simd::tanh(V(-inf)));
    REQUIRE(std::abs(lanes[0] + 1.0f) <= tolerance);
    REQUIRE(std::abs(simd::tanh(inf) - 1.0f) <= tolerance);
    REQUIRE(std::abs(simd::tanh(-inf) + 1.0f) <= tolerance);
    REQUIRE(std::abs(simd::tanh(1e30f) - 1.0f) <= tolerance);
}

TEMPLATE_TEST_CASE("activation: NaN stays NaN through every activation, in vector and scalar form", "[activation]",
                   Identity, ReLU, Tanh, Sigmoid, Softplus, GELU, ELU, LeakyReLU<>, SiLU, GELUExact, Sin30) {
    auto check = [](auto t) {
        using T = decltype(t);
        using V = simd::vec<T>;
        const T nan = std::numeric_limits<T>::quiet_NaN();
        T lanes[simd::width<T>];
        simd::storev(lanes, TestType::value(V(nan)));
        REQUIRE(std::isnan(lanes[0]));
        REQUIRE(std::isnan(TestType::value(nan)));
    };
    check(0.0f);
    check(0.0);
}

TEST_CASE("activation: softplus and sigmoid do not overflow for large |z|", "[activation]") {
    REQUIRE(Softplus::value(1000.0) == Approx(1000.0));
    REQUIRE(Softplus::value(-1000.0) == Approx(0.0).margin(1e-300));
    REQUIRE(Sigmoid::value(-1000.0f) == 0.0f);
    REQUIRE(std::isfinite(Softplus::pullback(1.0, 1000.0)));
}

TEST_CASE("activation: LeakyReLU's name carries its slope, exactly", "[activation]") {
    REQUIRE(std::string(LeakyReLU<>::name) == "leaky_relu(1/100)");
    REQUIRE(std::string(LeakyReLU<3, 1000>::name) == "leaky_relu(3/1000)");
    REQUIRE(LeakyReLU<1, 5>::value(-2.0) == -0.4);
}

TEST_CASE("activation: Sin's name carries its frequency, exactly", "[activation]") {
    REQUIRE(std::string(Sin<>::name) == "sin(1/1)");
    REQUIRE(std::string(Sin<30>::name) == "sin(30/1)");
    REQUIRE(std::string(Sin<5, 2>::name) == "sin(5/2)");
    REQUIRE(Sin<5, 2>::value(0.4) == std::sin(2.5 * 0.4));
}

// The exact GELU rests on xsimd 8's erfc for batches: against the C library's erfc lane by lane, as
// absolute error of Phi(z) = erfc(-z / sqrt 2) / 2 and relative error of GELU itself (where 1 + erf
// would cancel for negative z). Measured on this machine (AVX-512): Phi within 3.7e-15 in double and
// 7.6e-8 in float; GELU's relative error grows in the far negative tail (erfc's own
// relative error: up to 5.5e-12 in double, 1.2e-5 in float, at z near -12 where GELU is below 1e-31).
template <class T>
void exact_gelu_against_std(double tol_abs, double tol_rel) {
    using V = simd::vec<T>;
    double worst_abs = 0, worst_rel = 0;
    for (double z = -12; z <= 12; z += 0.00731) {
        T lanes[simd::width<T>];
        simd::storev(lanes, GELUExact::cdf(V(static_cast<T>(z))));
        const double zt = static_cast<double>(static_cast<T>(z));
        const double ref = 0.5 * std::erfc(-zt / std::sqrt(2.0));
        worst_abs = test::worse(worst_abs, std::abs(static_cast<double>(lanes[0]) - ref));
        simd::storev(lanes, GELUExact::value(V(static_cast<T>(z))));
        const double gref = zt * ref;
        if (gref != 0 && std::abs(gref) > 1e-300)
            worst_rel = test::worse(worst_rel, std::abs(static_cast<double>(lanes[0]) - gref) / std::abs(gref));
    }
    INFO("Phi abs error " << worst_abs << ", GELU relative error " << worst_rel);
    REQUIRE(worst_abs < tol_abs);
    REQUIRE(worst_rel < tol_rel);
}

TEST_CASE("activation: exact GELU (erfc) matches std::erfc: 5e-15 in double, 2e-7 in float", "[activation]") {
    exact_gelu_against_std<double>(5e-15, 1e-10);
    exact_gelu_against_std<float>(2e-7, 5e-5);
}

}  // namespace test_activations
