// Conv1D (stride 1 through Conv's kernels, stride and dilation through the loop nest of
// kernels/conv_strided.hpp) and the strided Conv: the layer checker (finite differences in double, the
// contract's rules, float against double) on odd sizes, the forward pass against the definition, the
// shape rules, the architecture text, and the strided kernels against their scalar twins on odd sizes;
// networks of the new layers train to the same bits on 1, 2 and 3 threads and allocate nothing in a step.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "alloc_counter.hpp"
#include "chainlet/chainlet.hpp"
#include "chainlet/kernels/conv_strided.hpp"
#include "support.hpp"

namespace test_conv1d {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;

namespace {

// The layer checker on L bound to InShape; tol is looser for ReLU, whose kink a finite difference may cross.
template <class L, class InShape>
void require_layer_check(double tol = 1e-6) {
    LayerCheckOptions o;
    o.chunk_sizes = {1, 3, 17};
    o.tolerance = tol;
    const auto r = check_layer<L, Input<InShape::dims[0], InShape::dims[1]>>(o);
    INFO(r.report());
    REQUIRE(r.passed());
}
template <class L, std::size_t H, std::size_t W, std::size_t C>
void require_layer_check_image(double tol = 1e-6) {
    LayerCheckOptions o;
    o.tolerance = tol;
    const auto r = check_layer<L, Input<H, W, C>>(o);
    INFO(r.report());
    REQUIRE(r.passed());
}

// Conv1D straight from the definition: zero padding of (span - 1) / 2 in front for same.
template <std::size_t L, std::size_t C, std::size_t K, std::size_t OC, class Act, Padding Pad, std::size_t S, std::size_t D>
void check_conv1d_forward() {
    using B = typename Conv1D<K, OC, Act, Pad, S, D>::template bound<Shape<L, C>>;
    constexpr std::size_t span = D * (K - 1) + 1;
    constexpr long front = Pad == Padding::same ? static_cast<long>((span - 1) / 2) : 0;
    constexpr std::size_t OL = Pad == Padding::same ? L : (L - span) / S + 1;
    STATIC_REQUIRE(std::is_same_v<typename B::out_shape, Shape<OL, OC>>);
    for (std::size_t n : {1, 5, 19}) {
        const auto p = test::random_vector(B::num_params, 7, 0.5);
        const auto x = test::random_vector(B::in_size * n, 8);
        std::vector<double> y(B::out_size * n), saved(B::saved_per_sample * n);
        B::forward(p.data(), x.data(), y.data(), saved.data(), n);
        std::vector<double> ref(y.size());
        for (std::size_t s = 0; s < n; ++s)
            for (std::size_t l = 0; l < OL; ++l)
                for (std::size_t oc = 0; oc < OC; ++oc) {
                    double z = p[K * C * OC + oc];
                    for (std::size_t k = 0; k < K; ++k)
                        for (std::size_t c = 0; c < C; ++c) {
                            const long i = static_cast<long>(l * S + k * D) - front;
                            if (i < 0 || i >= static_cast<long>(L)) continue;
                            z += p[(k * C + c) * OC + oc] * x[(static_cast<std::size_t>(i) * C + c) * n + s];
                        }
                    ref[(l * OC + oc) * n + s] = Act::value(z);
                }
        INFO("L=" << L << " C=" << C << " K=" << K << " OC=" << OC << " stride=" << S << " dilation=" << D << " n=" << n);
        REQUIRE(test::max_rel_diff(y, ref) < 1e-12);
    }
}

}  // namespace

TEST_CASE("Conv1D: layer check, stride 1 (Conv's kernels), valid and same", "[conv1d][gradient]") {
    require_layer_check<Conv1D<3, 4, Tanh>, Shape<11, 3>>();
    require_layer_check<Conv1D<5, 7, Identity, Padding::same>, Shape<9, 2>>();
    require_layer_check<Conv1D<4, 3, Softplus, Padding::same>, Shape<7, 5>>();  // even kernel: one more at the end
    require_layer_check<Conv1D<2, 5, ReLU>, Shape<6, 1>>(1e-5);
}

TEST_CASE("Conv1D: layer check with stride and dilation", "[conv1d][gradient]") {
    require_layer_check<Conv1D<3, 4, Tanh, Padding::valid, 2>, Shape<11, 3>>();         // covers the end exactly
    require_layer_check<Conv1D<3, 5, Identity, Padding::valid, 3>, Shape<12, 2>>();     // drops trailing positions
    require_layer_check<Conv1D<3, 2, Softplus, Padding::valid, 1, 2>, Shape<10, 3>>();  // dilation
    require_layer_check<Conv1D<4, 3, Sigmoid, Padding::same, 1, 3>, Shape<9, 2>>();     // padded dilation, span 10 > L
    require_layer_check<Conv1D<2, 6, Tanh, Padding::same, 1, 2>, Shape<8, 4>>();        // an even kernel dilated: span 3
    require_layer_check<Conv1D<3, 9, ReLU, Padding::valid, 2, 2>, Shape<13, 3>>(1e-5);  // both, OC with a tail block
}

TEST_CASE("Conv1D: forward pass against the definition", "[conv1d]") {
    check_conv1d_forward<11, 3, 3, 4, Tanh, Padding::valid, 1, 1>();
    check_conv1d_forward<9, 2, 4, 5, Identity, Padding::same, 1, 1>();
    check_conv1d_forward<12, 2, 3, 5, Identity, Padding::valid, 3, 1>();
    check_conv1d_forward<10, 3, 3, 6, Softplus, Padding::valid, 1, 2>();
    check_conv1d_forward<9, 2, 4, 3, Sigmoid, Padding::same, 1, 3>();
    check_conv1d_forward<8, 2, 2, 3, Tanh, Padding::same, 1, 2>();  // span 3
    check_conv1d_forward<5, 1, 4, 2, Identity, Padding::same, 1, 1>();
    check_conv1d_forward<13, 3, 3, 9, ReLU, Padding::valid, 2, 2>();
}

TEST_CASE("Conv1D: architecture text names stride and dilation only when not 1", "[conv1d]") {
    REQUIRE(Conv1D<3, 4, Tanh>::bound<Shape<11, 3>>::describe() == "Conv1D[3,4,tanh,valid]");
    REQUIRE(Conv1D<3, 4, ReLU, Padding::same, 1, 2>::bound<Shape<11, 3>>::describe() ==
            "Conv1D[3,4,relu,same,dilation=2]");
    REQUIRE(Conv1D<3, 4, Identity, Padding::valid, 2>::bound<Shape<11, 3>>::describe() ==
            "Conv1D[3,4,identity,valid,stride=2]");
    // The stride-1 Conv keeps its text (checkpoints depend on it); a strided one adds the stride.
    REQUIRE(Conv<3, 3, 4, ReLU>::bound<Shape<8, 8, 1>>::describe() == "Conv[3x3,4,relu,valid]");
    REQUIRE(Conv<3, 3, 4, ReLU, Padding::valid, 2>::bound<Shape<8, 8, 1>>::describe() ==
            "Conv[3x3,4,relu,valid,stride=2]");
}

TEST_CASE("Conv with stride: layer check and shape rule", "[conv][stride][gradient]") {
    using A = Conv<3, 3, 4, Tanh, Padding::valid, 2>::bound<Shape<9, 8, 2>>;
    STATIC_REQUIRE(std::is_same_v<A::out_shape, Shape<4, 3, 4>>);  // (9 - 3) / 2 + 1, (8 - 3) / 2 + 1 (floor)
    require_layer_check_image<Conv<3, 3, 4, Tanh, Padding::valid, 2>, 9, 8, 2>();
    require_layer_check_image<Conv<2, 3, 5, Softplus, Padding::valid, 3>, 7, 10, 3>();
    require_layer_check_image<Conv<4, 2, 6, ReLU, Padding::valid, 2>, 8, 5, 1>(1e-5);
}

TEST_CASE("Conv with stride: forward pass against the definition", "[conv][stride]") {
    constexpr std::size_t H = 9, W = 10, C = 2, KH = 3, KW = 2, OC = 5, S = 2;
    using B = Conv<KH, KW, OC, Tanh, Padding::valid, S>::bound<Shape<H, W, C>>;
    for (std::size_t n : {1, 4, 21}) {
        const auto p = test::random_vector(B::num_params, 9, 0.5);
        const auto x = test::random_vector(B::in_size * n, 10);
        std::vector<double> y(B::out_size * n), saved(B::saved_per_sample * n + 1);
        B::forward(p.data(), x.data(), y.data(), saved.data(), n);
        std::vector<double> ref(y.size());
        for (std::size_t s = 0; s < n; ++s)
            for (std::size_t oy = 0; oy < B::OH; ++oy)
                for (std::size_t ox = 0; ox < B::OW; ++ox)
                    for (std::size_t oc = 0; oc < OC; ++oc) {
                        double z = p[B::num_weights + oc];
                        for (std::size_t ky = 0; ky < KH; ++ky)
                            for (std::size_t kx = 0; kx < KW; ++kx)
                                for (std::size_t c = 0; c < C; ++c)
                                    z += p[((ky * KW + kx) * C + c) * OC + oc] *
                                         x[(((oy * S + ky) * W + ox * S + kx) * C + c) * n + s];
                        ref[((oy * B::OW + ox) * OC + oc) * n + s] = Tanh::value(z);
                    }
        REQUIRE(test::max_rel_diff(y, ref) < 1e-12);
    }
}

TEMPLATE_TEST_CASE("strided conv kernels equal their scalar twins on odd sizes", "[kernel][conv][stride]", float,
                   double) {
    using T = TestType;
    const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-13;
    // (IH, IW, IC, OH, OW, OC, KH, KW, SH, SW, DH, DW); IH, IW fit the taps exactly or with rows to spare.
    const std::vector<kernels::StridedConvShape> shapes = {
        {11, 1, 3, 5, 1, 7, 3, 1, 2, 1, 1, 1},  {13, 1, 2, 5, 1, 5, 3, 1, 2, 1, 2, 1},
        {9, 7, 3, 3, 3, 6, 3, 3, 3, 2, 1, 1},   {10, 9, 1, 4, 3, 9, 2, 3, 2, 3, 2, 1},
        {17, 1, 5, 15, 1, 3, 2, 1, 1, 1, 2, 1},
    };
    for (const auto& s : shapes)
        for (std::size_t n : {1, 7, 17, 37}) {
            INFO("IH=" << s.IH << " IW=" << s.IW << " IC=" << s.IC << " OC=" << s.OC << " n=" << n);
            REQUIRE((s.OH - 1) * s.SH + (s.KH - 1) * s.DH < s.IH);
            REQUIRE((s.OW - 1) * s.SW + (s.KW - 1) * s.DW < s.IW);
            const auto w = test::random_vector<T>(s.K() * s.OC, 1, 0.5);
            const auto b = test::random_vector<T>(s.OC, 2);
            const auto in = test::random_vector<T>(s.IH * s.IW * s.IC * n, 3);
            const auto dz = test::random_vector<T>(s.OH * s.OW * s.OC * n, 4);
            const std::size_t out_n = s.OH * s.OW * s.OC * n;
            std::vector<T> y(out_n), z(out_n), yr(out_n), zr(out_n);
            kernels::strided_conv_forward<Tanh>(s, w.data(), b.data(), in.data(), n, y.data(), z.data());
            kernels::strided_conv_forward_reference<Tanh>(s, w.data(), b.data(), in.data(), n, yr.data(), zr.data());
            REQUIRE(test::max_rel_diff(z, zr) < tol);
            REQUIRE(test::max_rel_diff(y, yr) < tol);
            auto g = test::random_vector<T>(s.K() * s.OC, 5), gr = g;  // adds into g
            kernels::strided_conv_weight_grad(s, in.data(), dz.data(), n, g.data());
            kernels::strided_conv_weight_grad_reference(s, in.data(), dz.data(), n, gr.data());
            REQUIRE(test::max_rel_diff(g, gr) < tol * 10);
            std::vector<T> din(in.size(), T(7)), dinr(in.size(), T(-3));  // overwritten
            kernels::strided_conv_input_grad(s, w.data(), dz.data(), n, din.data());
            kernels::strided_conv_input_grad_reference(s, w.data(), dz.data(), n, dinr.data());
            REQUIRE(test::max_rel_diff(din, dinr) < tol);
        }
}

TEST_CASE("crop_copy undoes pad_copy", "[kernel]") {
    const std::size_t H = 5, W = 3, C = 2, n = 7;
    const auto x = test::random_vector(H * W * C * n, 11);
    std::vector<double> padded((H + 3) * (W + 3) * C * n), back(x.size());
    kernels::pad_copy(x.data(), H, W, C, n, 1, 2, 2, 1, padded.data());
    kernels::crop_copy(static_cast<const double*>(padded.data()), H, W, C, n, 1, 2, 1, back.data());
    REQUIRE(back == x);
}

namespace {

// Conv1D with same padding, stride and dilation, both 1-D pools and GlobalAvgPool; and a strided Conv
// with AvgPool and a Flatten.
using SeqNet = Chain<Input<24, 3>, Conv1D<5, 8, ReLU, Padding::same>, MaxPool1D<2>, Conv1D<3, 8, Tanh, Padding::valid, 2, 2>,
                     AvgPool1D<2>, GlobalAvgPool, Dense<4>>;
using StridedNet = Chain<Input<11, 11, 2>, Conv<3, 3, 6, Tanh, Padding::valid, 2>, AvgPool<2>, Flatten, Dense<4>>;

template <class Net>
std::vector<float> train(const std::vector<float>& x, const std::vector<float>& y, std::size_t batch, int threads) {
    std::vector<float> p(Net::num_params);
    init_params<Net>(p, 5);
    Adam opt(1e-3f);
    FitOptions o;
    o.epochs = 2;
    o.batch = batch;
    o.seed = 9;
    o.threads = threads;
    fit<Net>(p, SquaredError{}, x, y, opt, o);
    return p;
}

template <class Net>
void require_same_bits_on_any_thread_count() {
    using WS = Workspace<Net, float>;
    const std::size_t batch = 3 * WS::chunk + 5, n = 3 * batch;
    const auto x = test::random_vector<float>(Net::in_size * n, 3), y = test::random_vector<float>(Net::out_size * n, 4);
    const auto p1 = train<Net>(x, y, batch, 1);
    std::vector<float> p0(Net::num_params);
    init_params<Net>(p0, 5);
    REQUIRE(p1 != p0);  // training moved the parameters
    REQUIRE(p1 == train<Net>(x, y, batch, 2));
    REQUIRE(p1 == train<Net>(x, y, batch, 3));
}

template <class Net>
void require_no_allocation_in_a_step() {
    for (std::size_t n : {std::size_t(1), std::size_t(300)}) {
        std::vector<float> p(Net::num_params), g(Net::num_params);
        init_params<Net>(p, 1);
        const auto x = test::random_vector<float>(Net::in_size * n, 2), y = test::random_vector<float>(Net::out_size * n, 3);
        Workspace<Net, float> ws(n, 2);
        Adam opt(1e-3f);
        opt.init(p.size());
        value_and_gradient<Net>(ws, p, g, x, y, SquaredError{}, 2);  // warm-up (OpenMP starts its threads)
        std::vector<float> out(Net::out_size * n);
        predict<Net>(ws, p, x, out, 2);
        const long before = test::allocations.load();
        for (int step = 0; step < 5; ++step) {
            value_and_gradient<Net>(ws, p, g, x, y, SquaredError{}, 2);
            opt.step(p, g);
        }
        predict<Net>(ws, p, x, out, 2);
        const long during = test::allocations.load() - before;  // read before Catch's INFO allocates
        INFO("n=" << n);
        REQUIRE(during == 0);
    }
}

}  // namespace

TEST_CASE("Conv1D and strided-conv nets train to the same bits on 1, 2 and 3 threads", "[conv1d][repro][parallel]") {
    require_same_bits_on_any_thread_count<SeqNet>();
    require_same_bits_on_any_thread_count<StridedNet>();
}

TEST_CASE("Conv1D and strided-conv nets: a training step and predict allocate nothing", "[conv1d][alloc]") {
    require_no_allocation_in_a_step<SeqNet>();
    require_no_allocation_in_a_step<StridedNet>();
}

}  // namespace test_conv1d
