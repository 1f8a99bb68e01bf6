// Every SIMD kernel against its scalar twin, on awkward sizes (1, 3, 7, 17, 33, ...) so that the
// vector tiles, the one-vector tiles and the scalar tails all run, in float and double.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "chainlet/activations.hpp"
#include "chainlet/kernel_instances.hpp"
#include "chainlet/kernels/conv.hpp"
#include "chainlet/kernels/elementwise.hpp"
#include "chainlet/kernels/gemm.hpp"
#include "support.hpp"

namespace test_kernels {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;
using namespace chainlet::kernels;

namespace {

const std::size_t sizes[] = {1, 3, 7, 17, 33, 70};
// Row lengths for kernels with half- and quarter-width vector tails (outer_product, gemv_t): in AVX-512
// float, 4 and 12 end in a quarter, 29 = 16 + 8 + 4 + 1 runs every width.
const std::size_t narrow_tail_sizes[] = {1, 3, 4, 7, 12, 17, 29, 33, 70};

// gemm_nn's columns: with full tiles of panel_vectors vectors of W lanes, N % (panel_vectors * W) picks
// the tiles past the full ones. With AVX-512 a rest that ends in a part of a vector runs in tiles whose
// last vector is masked (float, 3 * 16 = 48: 1, 3, 7 one vector of 1, 3, 7 lanes; 17 and 29 two
// vectors, the second of 1 and 13 lanes; 33 three, the last of 1; 58, 70 and 81 a full tile, then 10
// lanes in one vector, 22 in two, 33 in three), and a rest of whole vectors in whole-vector tiles (16,
// 32, and 64 = a full tile and a vector). Without AVX-512 (AVX2, 2 x 8 = 16 floats) the rests run in whole
// vectors, then half- and quarter-width vectors where the type has them, then scalars.
const std::size_t gemm_nn_columns[] = {1, 3, 7, 16, 17, 29, 32, 33, 58, 64, 70, 81};

// gemm_nn's rows: full tiles take blocks of panel_rows (8 or 4) rows, then 4, 2, 1; one-vector tiles
// blocks of one_vector_rows (16 or 8), then 8, 4, 2, 1 (29 = 3 * 8 + 4 + 1 or 16 + 8 + 4 + 1; 70 =
// 8 * 8 + 4 + 2 or 4 * 16 + 4 + 2).
const std::vector<std::size_t> gemm_nn_rows = {1, 3, 7, 17, 29, 33, 70};

// pads: C, B, z (and a column bias) with rows longer than N by pad (ldc = ldb = N + pad), to show that
// the tiles past the last whole vector (masked with AVX-512, narrower vectors and scalars elsewhere)
// neither write past a row's N columns nor let what lies there into the sums. Past N: NaN in B and in a
// column bias (a lane that read them would turn NaN), a finite sentinel in C (a masked load and store
// one lane too wide would change it, where a NaN written over a NaN would not show), another in z.
template <class T>
constexpr T c_sentinel = T(12345);

// A (M x K), B (K x ld), a bias and C's start (M x ld) for gemm_nn with rows of ld = N + pad, the pads as above.
template <Init init, class T>
struct GemmNNOperands {
    std::vector<T> a, b, bias, c_start;
    GemmNNOperands(std::size_t M, std::size_t N, std::size_t K, std::size_t pad)
        : a(test::random_vector<T>(M * K, M * 100 + K)),
          b(test::random_vector<T>(K * (N + pad), N * 7 + K + pad)),
          bias(test::random_vector<T>(std::max(M, N) + pad, M + N)),
          c_start(test::random_vector<T>(M * (N + pad), 5)) {
        const std::size_t ld = N + pad;
        const T nan = std::numeric_limits<T>::quiet_NaN();
        for (std::size_t k = 0; k < K; ++k) std::fill_n(b.begin() + k * ld + N, pad, nan);
        if constexpr (init == Init::col_bias) std::fill_n(bias.begin() + N, pad, nan);
        for (std::size_t i = 0; i < M; ++i) std::fill_n(c_start.begin() + i * ld + N, pad, c_sentinel<T>);
    }
};

template <class Act, Init init, class T>
void check_gemm_nn(bool transposed_a, bool with_z, const std::vector<std::size_t>& rows = gemm_nn_rows,
                   const std::vector<std::size_t>& depths = {1, 5, 19}, const std::vector<std::size_t>& pads = {0}) {
    const T z_sentinel = T(7);
    const double tolerance = sizeof(T) == 4 ? 2e-5 : 1e-12;
    for (std::size_t M : rows)
        for (std::size_t N : gemm_nn_columns)
            for (std::size_t K : depths)
                for (std::size_t pad : pads) {
                    const std::size_t ld = N + pad;
                    const GemmNNOperands<init, T> op(M, N, K, pad);
                    const auto& [a, b, bias, c_start] = op;
                    const ptrdiff_t rs = transposed_a ? 1 : static_cast<ptrdiff_t>(K);
                    const ptrdiff_t cs = transposed_a ? static_cast<ptrdiff_t>(M) : 1;
                    auto c1 = c_start, c2 = c_start;
                    std::vector<T> z1(M * ld, z_sentinel), z2 = z1;
                    gemm_nn<Act, init>(M, N, K, a.data(), rs, cs, b.data(), ld, c1.data(), ld, bias.data(),
                                       with_z ? z1.data() : nullptr);
                    gemm_nn_reference<Act, init>(M, N, K, a.data(), rs, cs, b.data(), ld, c2.data(), ld,
                                                 bias.data(), with_z ? z2.data() : nullptr);
                    INFO("M=" << M << " N=" << N << " K=" << K << " pad=" << pad);
                    REQUIRE(test::max_rel_diff(c1, c2) < tolerance);
                    if (with_z) REQUIRE(test::max_rel_diff(z1, z2) < tolerance);
                    for (std::size_t i = 0; i < M; ++i)
                        for (std::size_t j = N; j < ld; ++j) {
                            REQUIRE(c1[i * ld + j] == c_sentinel<T>);
                            REQUIRE(z1[i * ld + j] == z_sentinel);
                        }
                    if (transposed_a) {
                        // A's rows adjacent, the stride known to the compiler: the same operations, so the same bits
                        auto c3 = c_start;
                        std::vector<T> z3(M * ld, z_sentinel);
                        gemm_nn<Act, init>(M, N, K, a.data(), unit_stride, cs, b.data(), ld, c3.data(), ld,
                                           bias.data(), with_z ? z3.data() : nullptr);
                        REQUIRE(c3 == c1);
                        if (with_z) REQUIRE(z3 == z1);
                    }
                }
}

}  // namespace

TEMPLATE_TEST_CASE("gemm_nn matches its scalar twin", "[kernel]", float, double) {
    check_gemm_nn<Identity, Init::zero, TestType>(false, false);
    check_gemm_nn<NoEpilogue, Init::accumulate, TestType>(true, false);
    check_gemm_nn<Tanh, Init::row_bias, TestType>(true, true);
    check_gemm_nn<GELU, Init::col_bias, TestType>(false, true);
    check_gemm_nn<ReLU, Init::row_bias, TestType>(false, false);
}

TEMPLATE_TEST_CASE("gemm_nn leaves the memory past each row's N columns alone", "[kernel]", float, double) {
    // rows of C and B longer than N by 1 and 13 (check_gemm_nn): a part of a vector and more past N
    const std::vector<std::size_t> rows = {3, 7, 12, 17}, pads = {1, 13};
    check_gemm_nn<NoEpilogue, Init::accumulate, TestType>(false, false, rows, {7}, pads);
    check_gemm_nn<ReLU, Init::row_bias, TestType>(false, true, rows, {7}, pads);
    check_gemm_nn<GELU, Init::col_bias, TestType>(false, true, rows, {7}, pads);
    check_gemm_nn<GELU, Init::col_bias, TestType>(true, true, rows, {7}, pads);
}

// gemm_nn_fixed_k: K known at compile time, and up to short_reduction its own tiles of one vector. Each
// output still adds its products in the order of k, so the bits are gemm_nn's, over every row and column
// rest, with and without the pre-activation, past-N memory untouched (pads of 13: NaN in B and a
// column bias, the sentinel in C, left as it was). (From zero, which it refuses, GCC 12 at -O3 rounded
// another product: 1 ulp off.)
template <std::size_t K, class Act, Init init, class T>
void check_gemm_nn_fixed_k(bool with_z) {
    const double tolerance = sizeof(T) == 4 ? 2e-5 : 1e-12;
    for (std::size_t M : gemm_nn_rows)
        for (std::size_t N : gemm_nn_columns)
            for (std::size_t pad : {0, 13}) {
                const std::size_t ld = N + pad;
                const GemmNNOperands<init, T> op(M, N, K, pad);
                const auto& [a, b, bias, c_start] = op;
                auto c1 = c_start, c2 = c_start, c3 = c_start;
                std::vector<T> z1(M * ld, T(7)), z2 = z1, z3 = z1;
                const ptrdiff_t cs = static_cast<ptrdiff_t>(M);
                gemm_nn<Act, init>(M, N, K, a.data(), unit_stride, cs, b.data(), ld, c1.data(), ld, bias.data(),
                                   with_z ? z1.data() : nullptr);
                gemm_nn_fixed_k<K, Act, init>(M, N, a.data(), unit_stride, cs, b.data(), ld, c2.data(), ld,
                                              bias.data(), with_z ? z2.data() : nullptr);
                gemm_nn_reference<Act, init>(M, N, K, a.data(), 1, cs, b.data(), ld, c3.data(), ld, bias.data(),
                                             with_z ? z3.data() : nullptr);
                INFO("M=" << M << " N=" << N << " K=" << K << " pad=" << pad);
                REQUIRE(c2 == c1);
                REQUIRE(z2 == z1);
                for (std::size_t i = 0; i < M; ++i)
                    for (std::size_t j = N; j < ld; ++j) REQUIRE(c2[i * ld + j] == c_sentinel<T>);
                REQUIRE(test::max_rel_diff(c2, c3) < tolerance);
            }
}

TEMPLATE_TEST_CASE("gemm_nn_fixed_k gives gemm_nn's bits", "[kernel]", float, double) {
    check_gemm_nn_fixed_k<1, Tanh, Init::row_bias, TestType>(true);
    check_gemm_nn_fixed_k<4, Tanh, Init::row_bias, TestType>(true);
    check_gemm_nn_fixed_k<4, NoEpilogue, Init::accumulate, TestType>(false);
    check_gemm_nn_fixed_k<3, GELU, Init::col_bias, TestType>(true);
    check_gemm_nn_fixed_k<short_reduction, ReLU, Init::row_bias, TestType>(false);
    check_gemm_nn_fixed_k<short_reduction + 1, Tanh, Init::row_bias, TestType>(true);
}

// hsum_add sums the lanes of many vectors at once by a transposing tree: every output must be the sum
// of its own vector (distinct lane values, so a sum landing in the wrong place shows).
template <class T, std::size_t N>
void check_hsum_add() {
    using V = simd::vec<T>;
    constexpr std::size_t W = simd::width<T>;
    V v[N];
    T expect[N], out[N];
    for (std::size_t i = 0; i < N; ++i) {
        T lanes[W];
        for (std::size_t j = 0; j < W; ++j) lanes[j] = static_cast<T>((i + 1) * 100 + j * j);
        v[i] = simd::loadv<V>(lanes);
        expect[i] = T(0.5) * static_cast<T>(i);
        out[i] = expect[i];
        for (std::size_t j = 0; j < W; ++j) expect[i] += lanes[j];
    }
    simd::hsum_add<T, N>(v, out);
    for (std::size_t i = 0; i < N; ++i) {
        INFO("N=" << N << " i=" << i);
        REQUIRE(out[i] == Approx(expect[i]).epsilon(1e-6));
    }
    // hsum_store writes the same sums in place of what was there
    simd::hsum_store<T, N>(v, out);
    for (std::size_t i = 0; i < N; ++i) {
        INFO("hsum_store N=" << N << " i=" << i);
        REQUIRE(out[i] == Approx(expect[i] - T(0.5) * static_cast<T>(i)).epsilon(1e-6));
    }
}

TEMPLATE_TEST_CASE("hsum_add and hsum_store put each vector's sum in its own place", "[kernel]", float, double) {
    check_hsum_add<TestType, 1>();
    check_hsum_add<TestType, 4>();
    check_hsum_add<TestType, 8>();
    check_hsum_add<TestType, 16>();
    check_hsum_add<TestType, 24>();
    check_hsum_add<TestType, 37>();
}

TEMPLATE_TEST_CASE("gemm_nt matches its scalar twin", "[kernel]", float, double) {
    using T = TestType;
    for (std::size_t M : sizes)
        for (std::size_t P : sizes)
            for (std::size_t K : sizes) {
                const auto a = test::random_vector<T>(M * K, M + K);
                const auto b = test::random_vector<T>(P * K, P * 3 + K);
                auto c1 = test::random_vector<T>(M * P, 9), c2 = c1;
                gemm_nt(M, P, K, a.data(), K, b.data(), K, c1.data(), P);
                gemm_nt_reference(M, P, K, a.data(), K, b.data(), K, c2.data(), P);
                INFO("M=" << M << " P=" << P << " K=" << K);
                REQUIRE(test::max_rel_diff(c1, c2) < (sizeof(T) == 4 ? 2e-5 : 1e-12));
            }
}

// gemv_rows takes the widest vector that K fills (full, half, quarter) and groups of rows: K over every
// width and tail, P over whole groups and leftover rows, rows with a stride longer than K.
TEMPLATE_TEST_CASE("gemv_rows matches its scalar twin", "[kernel]", float, double) {
    using T = TestType;
    for (std::size_t P : sizes)
        for (std::size_t K : narrow_tail_sizes)
            for (std::size_t ldb : {K, K + 3}) {
                const auto b = test::random_vector<T>(P * ldb, P * 5 + K);
                const auto a = test::random_vector<T>(K, K + 11);
                auto c1 = test::random_vector<T>(P, 13), c2 = test::random_vector<T>(P, 14);
                gemv_rows(P, K, b.data(), ldb, a.data(), c1.data());
                gemv_rows_reference(P, K, b.data(), ldb, a.data(), c2.data());
                INFO("P=" << P << " K=" << K << " ldb=" << ldb);
                REQUIRE(test::max_rel_diff(c1, c2) < (sizeof(T) == 4 ? 2e-5 : 1e-12));
            }
}

TEMPLATE_TEST_CASE("gemm_nt_nn_few matches its scalar twin, and gives gemm_nt's and gemm_nn's bits",
                   "[kernel]", float, double) {
    // dW += x dz^T and dx = W^T dz of a layer with P = 1..4 outputs; M rows of x (odd counts take the
    // one-row tiles), K samples (odd counts take the values past the vectors); rows of stride > K.
    using T = TestType;
    const double tol = sizeof(T) == 4 ? 2e-5 : 1e-12;
    auto check = [&]<std::size_t P>() {
        for (std::size_t M : sizes)
            for (std::size_t K : sizes) {
                const std::size_t lda = K + 1, ld = K + 3, ldx = K + 2;
                const auto a = test::random_vector<T>(M * lda, M + K);
                const auto dz = test::random_vector<T>(P * ld, P * 3 + K);
                const auto w = test::random_vector<T>(M * P, M + 7);
                auto c1 = test::random_vector<T>(M * P, 9), c2 = c1, c3 = c1;
                std::vector<T> dx1(M * ldx, T(-5)), dx2 = dx1, dx3 = dx1;
                for (std::size_t i = 0; i < M; ++i)  // written values only; the row padding stays
                    std::fill_n(dx1.begin() + static_cast<std::ptrdiff_t>(i * ldx), K,
                                std::numeric_limits<T>::quiet_NaN());
                gemm_nt_nn_few<P>(M, K, a.data(), lda, dz.data(), ld, w.data(), c1.data(), P, dx1.data(), ldx);
                auto c4 = c2;  // without dx: the same C, bit for bit
                gemm_nt_nn_few<P>(M, K, a.data(), lda, dz.data(), ld, w.data(), c4.data(), P, static_cast<T*>(nullptr),
                                  ldx);
                REQUIRE(c4 == c1);
                gemm_nt_nn_few_reference(M, P, K, a.data(), lda, dz.data(), ld, w.data(), c2.data(), P, dx2.data(),
                                         ldx);
                INFO("P=" << P << " M=" << M << " K=" << K);
                REQUIRE(test::max_rel_diff(c1, c2) < tol);
                REQUIRE(test::max_rel_diff(dx1, dx2) < tol);
                REQUIRE(std::none_of(dx1.begin(), dx1.end(), [](T v) { return std::isnan(v); }));  // all written
                // The separate kernels it replaces in Dense's pullback: the same sums in the same order
                gemm_nt(M, P, K, a.data(), lda, dz.data(), ld, c3.data(), P);
                gemm_nn<NoEpilogue, Init::zero>(M, K, P, w.data(), static_cast<std::ptrdiff_t>(P), 1, dz.data(), ld,
                                                dx3.data(), ldx);
                // dx's bits too where gemm_nn takes whole vectors (its narrower vectors' FMAs are left to
                // contraction by xsimd, which GCC 12 does in some instantiations and not in others)
                REQUIRE(test::max_rel_diff(dx1, dx3) < tol);
                const std::size_t whole = simd::enabled ? K - K % simd::width<T> : K;
                for (std::size_t i = 0; i < M; ++i)
                    REQUIRE(std::equal(dx1.begin() + static_cast<std::ptrdiff_t>(i * ldx),
                                       dx1.begin() + static_cast<std::ptrdiff_t>(i * ldx + whole),
                                       dx3.begin() + static_cast<std::ptrdiff_t>(i * ldx)));
                if (P == 4 && M % 4 == 0) REQUIRE(c1 == c3);
                else REQUIRE(test::max_rel_diff(c1, c3) < tol);
            }
    };
    check.template operator()<1>();
    check.template operator()<2>();
    check.template operator()<3>();
    check.template operator()<4>();
}

TEMPLATE_TEST_CASE("gemm_nt_activation matches its scalar twin, and with 4 rows C is gemm_nt's of dz bit for bit",
                   "[kernel]", float, double) {
    // Tanh (from the output; its scalar and vector forms give the same bits) and Softplus (from z,
    // through exp); with and without the bias sums and the store of dz; rows of stride ld > K.
    using T = TestType;
    const double tol = sizeof(T) == 4 ? 2e-5 : 1e-12;
    auto check = [&]<class Act, std::size_t M>() {
        for (std::size_t P : sizes)
            for (std::size_t K : sizes)
                for (bool bias : {false, true})
                    for (bool store : {false, true}) {
                        const std::size_t ld = K + 3;
                        const auto a = test::random_vector<T>(M * K, M + K);
                        const auto dy = test::random_vector<T>(P * ld, P * 3 + K);
                        const auto s = test::random_vector<T>(P * ld, P + 5 * K);
                        auto c1 = test::random_vector<T>(M * P, 9), c2 = c1, c3 = c1;
                        auto d1 = test::random_vector<T>(P, 4), d2 = d1;
                        auto dy1 = dy, dy2 = dy;
                        gemm_nt_activation<Act, M>(P, K, a.data(), K, dy1.data(), s.data(), ld, c1.data(), P,
                                                   bias ? d1.data() : nullptr, store);
                        gemm_nt_activation_reference<Act>(M, P, K, a.data(), K, dy2.data(), s.data(), ld, c2.data(), P,
                                                          bias ? d2.data() : nullptr, store);
                        INFO(Act::name << " M=" << M << " P=" << P << " K=" << K << " bias=" << bias
                                       << " store=" << store);
                        REQUIRE(test::max_rel_diff(c1, c2) < tol);
                        REQUIRE(test::max_rel_diff(d1, d2) < tol);
                        if (!bias) REQUIRE(d1 == test::random_vector<T>(P, 4));
                        if (store) REQUIRE(test::max_rel_diff(dy1, dy2) < tol);
                        else REQUIRE(dy1 == dy);
                        if constexpr (M == 4 && std::is_same_v<Act, Tanh>) {
                            auto dz = dy;
                            for (std::size_t p = 0; p < P; ++p)
                                activation_pullback_reference<Act>(dz.data() + p * ld, s.data() + p * ld, K);
                            gemm_nt(M, P, K, a.data(), K, dz.data(), ld, c3.data(), P);
                            REQUIRE(c1 == c3);
                        }
                    }
    };
    check.template operator()<Tanh, 1>();
    check.template operator()<Tanh, 3>();
    check.template operator()<Tanh, 4>();
    check.template operator()<Softplus, 2>();
    check.template operator()<Softplus, 4>();
}

TEMPLATE_TEST_CASE("activation_pullback_row_sums: the bits of activation_pullback and row_sums_add", "[kernel]", float,
                   double) {
    using T = TestType;
    auto check = [&]<class Act>() {
        for (std::size_t M : sizes)
            for (std::size_t N : sizes)
                for (const std::size_t gap : {0u, 5u}) {  // rows back to back (one flat pass for short rows) or apart
                    const std::size_t ld = N + gap;
                    const auto dy = test::random_vector<T>(M * ld, M * 7 + N);
                    const auto s = test::random_vector<T>(M * ld, M + 3 * N);
                    auto dz1 = dy, dz2 = dy;
                    auto o1 = test::random_vector<T>(M, M), o2 = o1;
                    activation_pullback_row_sums<Act>(M, N, dz1.data(), s.data(), ld, o1.data());
                    // The documented reference: short rows back to back in one flat pass, others row by row.
                    if (gap == 0 && N < 2 * chainlet::simd::width<T>)
                        activation_pullback<Act>(dz2.data(), s.data(), M * N);
                    else
                        for (std::size_t m = 0; m < M; ++m)
                            activation_pullback<Act>(dz2.data() + m * ld, s.data() + m * ld, N);
                    row_sums_add(M, N, dz2.data(), ld, o2.data());
                    INFO(Act::name << " M=" << M << " N=" << N << " ld=" << ld);
                    REQUIRE(dz1 == dz2);
                    REQUIRE(o1 == o2);
                    for (std::size_t m = 0; m < M; ++m)  // the gaps between rows are not written
                        for (std::size_t j = N; j < ld; ++j) REQUIRE(dz1[m * ld + j] == dy[m * ld + j]);
                }
    };
    check.template operator()<Tanh>();
    check.template operator()<Softplus>();
}

TEMPLATE_TEST_CASE("gemv_t matches its scalar twin", "[kernel]", float, double) {
    using T = TestType;
    for (std::size_t N : narrow_tail_sizes)
        for (std::size_t K : sizes) {
            const auto x = test::random_vector<T>(K, K);
            const auto b = test::random_vector<T>(K * N, N + K);
            const auto bias = test::random_vector<T>(N, N);
            std::vector<T> y1(N), y2(N), z1(N), z2(N);
            gemv_t<Sigmoid>(N, K, x.data(), b.data(), N, bias.data(), y1.data(), z1.data());
            gemv_t_reference<Sigmoid>(N, K, x.data(), b.data(), N, bias.data(), y2.data(), z2.data());
            INFO("N=" << N << " K=" << K);
            REQUIRE(test::max_rel_diff(y1, y2) < (sizeof(T) == 4 ? 2e-5 : 1e-12));
            REQUIRE(test::max_rel_diff(z1, z2) < (sizeof(T) == 4 ? 2e-5 : 1e-12));
            // without z, and the twin agrees with gemm_nn's twin (one row, a column bias)
            std::vector<T> y3(N);
            gemv_t<Tanh>(N, K, x.data(), b.data(), N, bias.data(), y1.data());
            gemm_nn_reference<Tanh, Init::col_bias>(1, N, K, x.data(), 0, 1, b.data(), N, y3.data(), N, bias.data());
            REQUIRE(test::max_rel_diff(y1, y3) < (sizeof(T) == 4 ? 2e-5 : 1e-12));
        }
}

TEMPLATE_TEST_CASE("activation_pullback_channel_sums matches its scalar twin", "[kernel]", float, double) {
    // Tanh (derivative from the output) and Softplus (from the pre-activation, through exp, whose vector
    // and scalar forms may round differently). n: the odd sizes, and one and two whole vectors (8, 16
    // and 32 cover both in float and double), which take a loop of their own, with and without blocks.
    using T = TestType;
    auto check = [&]<class Act>() {
        std::vector<std::size_t> ns(std::begin(sizes), std::end(sizes));
        ns.insert(ns.end(), {8, 16, 32});
        for (std::size_t P : {std::size_t(1), std::size_t(3), std::size_t(17)})
            for (std::size_t C : {std::size_t(1), std::size_t(6), std::size_t(7), std::size_t(16)})
                for (std::size_t n : ns) {
                    const auto dy = test::random_vector<T>(P * C * n, P * 31 + C * 7 + n);
                    const auto s = test::random_vector<T>(P * C * n, P + C + n);  // stand-ins for outputs or z
                    auto dz1 = dy, dz2 = dy;
                    auto d1 = test::random_vector<T>(C, C), d2 = d1;
                    activation_pullback_channel_sums<Act>(P, C, dz1.data(), s.data(), n, d1.data());
                    activation_pullback_channel_sums_reference<Act>(P, C, dz2.data(), s.data(), n, d2.data());
                    INFO(Act::name << " P=" << P << " C=" << C << " n=" << n);
                    REQUIRE(test::max_rel_diff(dz1, dz2) < (sizeof(T) == 4 ? 1e-5 : 1e-13));
                    REQUIRE(test::max_rel_diff(d1, d2) < (sizeof(T) == 4 ? 2e-5 : 1e-12));
                }
    };
    check.template operator()<Tanh>();
    check.template operator()<Softplus>();
}

TEMPLATE_TEST_CASE("pad_copy matches its scalar twin", "[kernel]", float, double) {
    using T = TestType;
    for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(17)})
        for (std::size_t pad : {std::size_t(0), std::size_t(1), std::size_t(4)}) {
            const std::size_t H = 5, W = 3, C = 3, top = pad, left = pad + 1, bottom = pad / 2, right = pad;
            const auto src = test::random_vector<T>(H * W * C * n, n + pad);
            const std::size_t size = (H + top + bottom) * (W + left + right) * C * n;
            auto d1 = test::random_vector<T>(size, 1), d2 = test::random_vector<T>(size, 2);  // garbage to overwrite
            pad_copy(src.data(), H, W, C, n, top, left, bottom, right, d1.data());
            pad_copy_reference(src.data(), H, W, C, n, top, left, bottom, right, d2.data());
            INFO("n=" << n << " pad=" << pad);
            REQUIRE(d1 == d2);
        }
}

TEMPLATE_TEST_CASE("pad_copy_sides writes pad_copy's rows of the window and nothing else", "[kernel]", float, double) {
    using T = TestType;
    for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(17)})
        for (std::size_t pad : {std::size_t(0), std::size_t(1), std::size_t(4)}) {
            const std::size_t H = 5, W = 3, C = 3, top = pad, left = pad + 1, bottom = pad / 2, right = pad;
            const std::size_t DW = W + left + right, row = DW * C * n;
            const auto src = test::random_vector<T>(H * W * C * n, n + pad);
            const auto garbage = test::random_vector<T>((H + top + bottom) * row, 1);
            std::vector<T> full(garbage.size()), sides = garbage;
            pad_copy(src.data(), H, W, C, n, top, left, bottom, right, full.data());
            pad_copy_sides(src.data(), H, W, C, n, top, left, right, sides.data());
            INFO("n=" << n << " pad=" << pad);
            for (std::size_t y = 0; y < H + top + bottom; ++y) {
                const auto& expected = y >= top && y < top + H ? full : garbage;
                const auto b = static_cast<std::ptrdiff_t>(y * row), e = static_cast<std::ptrdiff_t>((y + 1) * row);
                REQUIRE(std::equal(sides.begin() + b, sides.begin() + e, expected.begin() + b));
            }
        }
}

TEMPLATE_TEST_CASE("row_sums_add and add_to match their scalar twins", "[kernel]", float, double) {
    using T = TestType;
    for (std::size_t M : sizes)
        for (std::size_t N : sizes) {
            const auto a = test::random_vector<T>(M * N, M * N);
            auto o1 = test::random_vector<T>(M, M), o2 = o1;
            row_sums_add(M, N, a.data(), N, o1.data());
            row_sums_add_reference(M, N, a.data(), N, o2.data());
            REQUIRE(test::max_rel_diff(o1, o2) < (sizeof(T) == 4 ? 2e-5 : 1e-12));
            auto d = test::random_vector<T>(M * N, 3);
            auto expect = d;
            for (std::size_t i = 0; i < d.size(); ++i) expect[i] += a[i];
            add_to(d.data(), a.data(), d.size());
            REQUIRE(d == expect);
        }
}

TEMPLATE_TEST_CASE("outer_product matches its scalar twin, adding and writing", "[kernel]", float, double) {
    using T = TestType;
    for (std::size_t M : sizes)
        for (std::size_t N : narrow_tail_sizes) {
            const auto x = test::random_vector<T>(M, M), y = test::random_vector<T>(N, N + 1);
            auto c1 = test::random_vector<T>(M * N, 2), c2 = c1;
            outer_product<true>(M, N, x.data(), y.data(), c1.data(), N);
            outer_product_reference<true>(M, N, x.data(), y.data(), c2.data(), N);
            REQUIRE(test::max_rel_diff(c1, c2) < (sizeof(T) == 4 ? 2e-6 : 1e-14));
            // Writing: one rounded product per element, whatever c held (NaN here), the same bits as the twin.
            std::vector<T> w1(M * N, std::numeric_limits<T>::quiet_NaN()), w2(M * N);
            outer_product<false>(M, N, x.data(), y.data(), w1.data(), N);
            outer_product_reference<false>(M, N, x.data(), y.data(), w2.data(), N);
            REQUIRE(w1 == w2);
        }
}

TEST_CASE("gather_transpose: the blocked float path equals its scalar twin on odd sizes, with and without an index", "[kernel]") {
    // F and n around the 16 x 16 blocks of the AVX-512 path and the 8 x 8 blocks of the AVX2 one (every
    // size runs the scalar loop elsewhere): whole blocks, feature tails, sample tails, fewer than a block
    // of either, LeNet5's 784 pixels, and 2 to 4 features (a PINN's, the tiny MLP's).
    for (const std::size_t F : {1u, 2u, 3u, 4u, 5u, 8u, 9u, 15u, 16u, 17u, 35u, 48u, 784u})
        for (const std::size_t n : {1u, 7u, 8u, 9u, 15u, 16u, 17u, 33u, 47u, 48u}) {
            const std::size_t rows = n + 5;
            const auto x = test::random_vector<float>(F * rows, F + n);
            std::vector<std::uint32_t> idx(n);
            for (std::size_t s = 0; s < n; ++s) idx[s] = static_cast<std::uint32_t>((s * 7 + 3) % rows);
            for (const std::uint32_t* index : {static_cast<const std::uint32_t*>(nullptr), static_cast<const std::uint32_t*>(idx.data())}) {
                std::vector<float> fast(F * n, -1.0f), twin(F * n, -2.0f);
                gather_transpose(x.data(), F, index, n, fast.data());
                gather_transpose(x.data(), F, index, n, twin.data(), [](float v) { return v; });
                INFO("F=" << F << " n=" << n << " index=" << (index != nullptr));
                REQUIRE(fast == twin);
                for (std::size_t s = 0; s < n; ++s)
                    for (std::size_t f = 0; f < F; ++f) REQUIRE(fast[f * n + s] == x[(index ? index[s] : s) * F + f]);
            }
        }
}

TEST_CASE("gather_transpose and scatter_transpose are inverse, with and without an index", "[kernel]") {
    const std::size_t F = 5, n = 7;
    const auto x = test::random_vector<float>(F * n, 1);
    std::vector<float> t(F * n), back(F * n);
    gather_transpose(x.data(), F, nullptr, n, t.data());
    for (std::size_t s = 0; s < n; ++s)
        for (std::size_t f = 0; f < F; ++f) REQUIRE(t[f * n + s] == x[s * F + f]);
    scatter_transpose(t.data(), F, n, back.data());
    REQUIRE(back == x);
    const std::uint32_t idx[] = {6, 0, 3};
    std::vector<float> g(F * 3);
    gather_transpose(x.data(), F, idx, 3, g.data());
    for (std::size_t s = 0; s < 3; ++s)
        for (std::size_t f = 0; f < F; ++f) REQUIRE(g[f * 3 + s] == x[idx[s] * F + f]);
}

// The kernels run the vectors the build asks for, not a silent scalar fallback: xsimd takes the widest
// instruction set the compiler flags allow, and a build without it would pass every twin test above in
// scalar form (the aarch64 cross build must run NEON, scripts/test-aarch64.sh).
TEST_CASE("the SIMD kernels are the build's", "[kernel]") {
#if defined(CHAINLET_SCALAR)
    REQUIRE_FALSE(simd::enabled);
#else
    REQUIRE(simd::enabled);
#if defined(__aarch64__)
    REQUIRE(std::string(simd::arch_name) == xsimd::neon64::name());
    REQUIRE(simd::width<float> == 4);
#elif defined(__AVX512F__)
    REQUIRE(simd::width<float> == 16);
#elif defined(__AVX2__)
    REQUIRE(simd::width<float> == 8);
#endif
#endif
}

}  // namespace test_kernels
