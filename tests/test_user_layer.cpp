// The user-defined layer of docs/api.md ("Your own layer", tests/user_layer.hpp): it passes the layer
// checker, trains inside a chain, and round-trips through checkpoints and safetensors (PyTorch loads it
// in torch_crosscheck).
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/hvp.hpp"
#include "chainlet/derivatives/taylor.hpp"
#include "chainlet/io/checkpoint.hpp"
#include "chainlet/io/safetensors.hpp"
#include "support.hpp"
#include "user_layer.hpp"

namespace test_user_layer {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;

using Net = Chain<Input<3>, ScaleShift, Dense<16, Tanh>, Dense<1>>;

TEST_CASE("the documented user layer passes the layer checker", "[user_layer][gradient]") {
    const auto r = check_layer<ScaleShift, Input<5>>();
    INFO(r.report());
    REQUIRE(r.passed());
    const auto image = check_layer<ScaleShift, Input<3, 2, 2>>();  // any shape
    INFO(image.report());
    REQUIRE(image.passed());
}

TEST_CASE("the documented user layer's derivative rules pass the checker, alone and inside a chain", "[user_layer][derivatives]") {
    const auto r = check_layer<ScaleShift, Input<4>>();
    INFO(r.report());
    REQUIRE(r.passed());
    REQUIRE(r.jet_rule_checked);
    REQUIRE(r.hvp_rule_checked);
    // The whole chain as one bound layer: its rules walk ScaleShift's with Dense's (both passes).
    using Mixed = Chain<Input<3>, ScaleShift, Dense<6, Tanh>, Residual<Dense<6, Softplus>>, Dense<2>>;
    const auto chain = check_bound_layer<Mixed::sequence>();
    INFO(chain.report());
    REQUIRE(chain.passed());
    REQUIRE(chain.jet_rule_checked);
    REQUIRE(chain.hvp_rule_checked);
}

// The documented layer with a wrong jet rule: the shift b enters every column, not only the value.
struct ShiftEveryColumn : ScaleShift {
    template <class InShape>
    struct bound : ScaleShift::bound<InShape> {
        using base = ScaleShift::bound<InShape>;
        struct jet_rule : base::jet_rule {
            using layer = bound;
            template <class T>
            static void forward(const T* p, const T* x, T* y, T* saved, std::size_t m, const JetColumns& cols) {
                base::jet_rule::forward(p, x, y, saved, m, cols);
                for (std::size_t f = 0; f < base::in_size; ++f)
                    for (std::size_t c = 1; c < cols.C; ++c)
                        for (std::size_t s = 0; s < m; ++s) y[(f * cols.C + c) * m + s] += p[base::in_size + f];
            }
        };
        using hvp_rule = typename base::hvp_rule;  // inherited: the checker says so
    };
};

TEST_CASE("the layer checker catches a wrong jet rule and an inherited one", "[user_layer][derivatives]") {
    const auto r = check_layer<ShiftEveryColumn, Input<4>>();
    REQUIRE_FALSE(r.passed());
    REQUIRE_THAT(r.report(), Catch::Contains("jet_rule: the tangent columns differ from finite differences"));
    REQUIRE_THAT(r.report(), Catch::Contains("hvp_rule names another layer"));
    REQUIRE(r.jet_rule_checked);
    REQUIRE_FALSE(r.hvp_rule_checked);
}

// The documented layer with a bug: its pullback overwrites g instead of adding into it.
struct Overwrites : ScaleShift {
    template <class InShape>
    struct bound : ScaleShift::bound<InShape> {
        using base = ScaleShift::bound<InShape>;
        template <class T>
        static void pullback(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx,
                             std::size_t n) {
            std::fill_n(g, base::num_params, T(0));  // the bug: forgets what g held
            base::pullback(p, g, x, y, saved, scratch, dy, dx, n);
        }
    };
};

TEST_CASE("the layer checker catches a pullback that overwrites g", "[user_layer][gradient]") {
    const auto r = check_layer<Overwrites, Input<4>>();
    REQUIRE_FALSE(r.passed());
    REQUIRE_THAT(r.report(), Catch::Contains("does not add into g"));
}

// A layer whose optional pullback_assign adds into g instead of writing it.
struct AssignAdds : ScaleShift {
    template <class InShape>
    struct bound : ScaleShift::bound<InShape> {
        using base = ScaleShift::bound<InShape>;
        template <class T>
        static void pullback_assign(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx,
                                    std::size_t n) {
            base::pullback(p, g, x, y, saved, scratch, dy, dx, n);  // the bug: g's old contents stay in
        }
    };
};

TEST_CASE("the layer checker catches a pullback_assign that adds into g", "[user_layer][gradient]") {
    const auto r = check_layer<AssignAdds, Input<4>>();
    REQUIRE_FALSE(r.passed());
    REQUIRE_THAT(r.report(), Catch::Contains("pullback_assign wrote another parameter gradient"));
}

// A layer with batch statistics: y = a (x - mean over the chunk's samples) + b, with its exact gradient
// (dx = a (dy - mean dy)), so the finite differences agree; but its samples see each other, which the
// workspaces' padding and one-at-a-time batches rely on them not doing (layer.hpp).
struct ChunkCentred : ScaleShift {
    template <class InShape>
    struct bound : ScaleShift::bound<InShape> {
        using base = ScaleShift::bound<InShape>;
        static constexpr std::size_t F = base::in_size;
        template <class T>
        static T mean(const T* v, std::size_t n) {
            T s = 0;
            for (std::size_t i = 0; i < n; ++i) s += v[i];
            return s / static_cast<T>(n);
        }
        template <class T>
        static void forward(const T* p, const T* x, T* y, T*, std::size_t n) {
            for (std::size_t f = 0; f < F; ++f) {
                const T m = mean(x + f * n, n);
                for (std::size_t s = 0; s < n; ++s) y[f * n + s] = p[f] * (x[f * n + s] - m) + p[F + f];
            }
        }
        template <class T>
        static void pullback(const T* p, T* g, const T* x, const T*, T*, T*, T* dy, T* dx, std::size_t n) {
            for (std::size_t f = 0; f < F; ++f) {
                const T m = mean(x + f * n, n), md = mean(dy + f * n, n);
                for (std::size_t s = 0; s < n; ++s) {
                    g[f] += dy[f * n + s] * (x[f * n + s] - m);
                    g[F + f] += dy[f * n + s];
                    if (dx) dx[f * n + s] = p[f] * (dy[f * n + s] - md);
                }
            }
        }
    };
};

// A layer whose gradients are right for the chunk it is given, but whose samples see each other: the
// checker's finite differences agree with its pullback, and it fails with `message` all the same.
template <class L>
LayerCheckResult check_dependent_samples(const std::string& message) {
    const auto r = check_layer<L, Input<4>>();
    INFO(r.report());
    REQUIRE(r.parameter_gradient_error < 1e-6);
    REQUIRE(r.input_gradient_error < 1e-6);
    REQUIRE_FALSE(r.passed());
    REQUIRE_THAT(r.report(), Catch::Contains(message));
    return r;
}

TEST_CASE("the layer checker catches a layer whose samples see each other", "[user_layer][gradient]") {
    check_dependent_samples<ChunkCentred>("samples must be independent");
}

// y_s = a x_s + c x_(s-1) + b, with its exact gradient: a sample sees the one before it. Copies appended at
// the end of a chunk change nothing that the chunk's own samples see, so only moving one sample's input
// shows it; the input finite differences then go one entry at a time, and agree with the pullback.
struct SeesPrevious : ScaleShift {
    template <class InShape>
    struct bound : ScaleShift::bound<InShape> {
        using base = ScaleShift::bound<InShape>;
        static constexpr std::size_t F = base::in_size;
        static constexpr double c = 0.25;
        template <class T>
        static void forward(const T* p, const T* x, T* y, T*, std::size_t n) {
            for (std::size_t f = 0; f < F; ++f)
                for (std::size_t s = 0; s < n; ++s)
                    y[f * n + s] = p[f] * x[f * n + s] + (s > 0 ? T(c) * x[f * n + s - 1] : T(0)) + p[F + f];
        }
        template <class T>
        static void pullback(const T* p, T* g, const T* x, const T*, T*, T*, T* dy, T* dx, std::size_t n) {
            for (std::size_t f = 0; f < F; ++f)
                for (std::size_t s = 0; s < n; ++s) {
                    g[f] += dy[f * n + s] * x[f * n + s];
                    g[F + f] += dy[f * n + s];
                    if (dx) dx[f * n + s] = p[f] * dy[f * n + s] + (s + 1 < n ? T(c) * dy[f * n + s + 1] : T(0));
                }
        }
    };
};

TEST_CASE("the layer checker catches a sample that sees the one before it", "[user_layer][gradient]") {
    const auto r = check_dependent_samples<SeesPrevious>("another sample's input changed");
    REQUIRE_THAT(r.report(), !Catch::Contains("copies of another sample joined"));  // the copies do not show it
}

// The documented layer with Spoil::after_forward(x, y, count) applied to its forward output (count
// values): the layers below each break it in one way.
template <class Spoil>
struct SpoiltScaleShift : ScaleShift {
    template <class InShape>
    struct bound : ScaleShift::bound<InShape> {
        using base = ScaleShift::bound<InShape>;
        template <class T>
        static void forward(const T* p, const T* x, T* y, T* saved, std::size_t n) {
            base::forward(p, x, y, saved, n);
            Spoil::after_forward(x, y, base::in_size * n);
        }
    };
};

// NaN wherever an input is not a float: finite on the checker's inputs, which it draws exact in float,
// and NaN at the input finite differences' points x +- 1e-5.
struct NaNWhereInputNotFloat {
    template <class T>
    static void after_forward(const T* x, T* y, std::size_t count) {
        for (std::size_t i = 0; i < count; ++i)
            if (static_cast<T>(static_cast<float>(x[i])) != x[i]) y[i] = std::numeric_limits<T>::quiet_NaN();
    }
};
using NaNOffFloats = SpoiltScaleShift<NaNWhereInputNotFloat>;

TEST_CASE("the layer checker fails a NaN finite difference", "[user_layer][gradient]") {
    const auto r = check_layer<NaNOffFloats, Input<4>>();
    INFO(r.report());
    REQUIRE(r.parameter_gradient_error < 1e-6);
    REQUIRE(r.input_gradient_error == std::numeric_limits<double>::infinity());  // not the NaN left out
    REQUIRE_FALSE(r.passed());
    REQUIRE_THAT(r.report(), Catch::Contains("input gradient differs from finite differences by inf"));
}

// The first output NaN in float: right in double, so only the float run shows it.
struct FirstOutputNaNInFloat {
    template <class T>
    static void after_forward(const T*, T* y, std::size_t) {
        if constexpr (std::is_same_v<T, float>) y[0] = std::numeric_limits<float>::quiet_NaN();
    }
};
using NaNInFloat = SpoiltScaleShift<FirstOutputNaNInFloat>;

TEST_CASE("the layer checker fails a float output NaN where the double one is not", "[user_layer][gradient]") {
    const auto r = check_layer<NaNInFloat, Input<4>>();
    INFO(r.report());
    REQUIRE(r.parameter_gradient_error < 1e-6);
    REQUIRE(r.input_gradient_error < 1e-6);
    REQUIRE(r.float_double_difference == std::numeric_limits<double>::infinity());  // not the NaN left out
    REQUIRE_FALSE(r.passed());
}

// rejects_shape (layer.hpp): false binds the layer as it is; true without a static_assert (which a
// layer must not do: the assertion is what stops the build) leaves stand-ins that throw, not a chain
// that silently computes nothing. (Buffers sized for the chain, so that the throw is the stand-in's,
// not a size check's.)
struct AcceptsShape {
    template <class InShape>
    struct bound : ScaleShift::bound<InShape> {
        static constexpr bool rejects_shape = false;
    };
};
struct RejectsSilently {
    template <class InShape>
    struct bound : ScaleShift::bound<InShape> {
        static constexpr bool rejects_shape = true;
    };
};

TEST_CASE("rejects_shape: false binds the layer, true without an assertion leaves stand-ins that throw", "[user_layer]") {
    using Accepted = Chain<Input<3>, AcceptsShape, Dense<2, Tanh>, Dense<1>>;
    using Plain = Chain<Input<3>, ScaleShift, Dense<2, Tanh>, Dense<1>>;
    static_assert(Accepted::num_params == Plain::num_params && !Accepted::rejects_shape);
    std::vector<double> p(Plain::num_params), x = {0.5, -1.0, 2.0, 1.5, 0.25, -0.75}, ya(2), yp(2);
    init_params<Plain>(p, 3);
    predict<Accepted>(p, x, ya);
    predict<Plain>(p, x, yp);
    REQUIRE(ya == yp);

    using Rejected = Chain<Input<3>, Dense<4, Tanh>, RejectsSilently, Dense<1>>;
    static_assert(Rejected::rejects_shape);
    static_assert(Rejected::num_params == 3 * 4 + 4);  // the Dense before it; stand-ins from there on
    std::vector<double> q(Rejected::num_params), out(2 * Rejected::out_size);  // stand-ins keep the width 4
    REQUIRE_THROWS_WITH(init_params<Rejected>(q, 3), Catch::Matchers::Contains("a stand-in"));
    REQUIRE_THROWS_WITH(predict<Rejected>(q, x, out), Catch::Matchers::Contains("a stand-in"));
    // and the derivative passes, whose rules for a stand-in throw as its forward does
    DerivativeWorkspace<Rejected, double> derivatives(DerivativeSpec::laplacian(3), 2, 1);
    std::vector<double> d(2 * Rejected::out_size * derivatives.spec().columns());
    REQUIRE_THROWS_WITH(derivatives.derivatives(q.data(), x.data(), d.data(), 2), Catch::Matchers::Contains("a stand-in"));
    HessianVectorWorkspace<Rejected, double> hvp(2, 1);
    std::vector<double> v(q.size(), 1.0), g(q.size()), hv(q.size()), t(2 * Rejected::out_size);
    REQUIRE_THROWS_WITH(hvp.hvp(q.data(), v.data(), g.data(), hv.data(), x.data(), t.data(), 2), Catch::Matchers::Contains("a stand-in"));
}

// A layer type without rejects_shape used directly as a Parallel branch (no Branch<...>): Parallel reads
// the branches' rejects_shape only where they have it.
struct PassCopy {
    template <class InShape>
    struct bound {
        static constexpr std::size_t in_size = InShape::size, out_size = InShape::size;
        using out_shape = InShape;
        static constexpr std::size_t num_params = 0, saved_per_sample = 0, scratch_per_sample = 0;
        template <class T>
        static void init(std::span<T>, Rng&, InitKind) {}
        template <class T>
        static void forward(const T*, const T* x, T* y, T*, std::size_t n, const Pass&) {
            std::copy_n(x, in_size * n, y);
        }
        template <class T>
        static void pullback(const T*, T*, const T*, const T*, T*, T*, T* dy, T* dx, std::size_t n) {
            if (dx) std::copy_n(dy, in_size * n, dx);
        }
    };
};

TEST_CASE("a layer without rejects_shape binds as a Parallel branch of its own", "[user_layer]") {
    using Direct = Chain<Input<3>, Parallel<Sum, PassCopy, Branch<Dense<3, Tanh>>>, Dense<1>>;
    using Residual3 = Chain<Input<3>, Residual<Dense<3, Tanh>>, Dense<1>>;  // the same function: x + f(x)
    static_assert(!Direct::rejects_shape && Direct::num_params == Residual3::num_params);
    std::vector<double> p(Direct::num_params), x = {0.5, -1.0, 2.0, 1.5, 0.25, -0.75}, yd(2), yr(2);
    init_params<Direct>(p, 7);
    predict<Direct>(p, x, yd);
    predict<Residual3>(p, x, yr);
    REQUIRE(yd[0] == Approx(yr[0]).epsilon(1e-14));
    REQUIRE(yd[1] == Approx(yr[1]).epsilon(1e-14));
}

TEST_CASE("a chain with the user layer trains and round-trips through the file formats", "[user_layer][fit][io]") {
    const std::size_t n = 256;
    std::vector<double> x(n * 3), y(n);
    Rng rng(5);
    for (std::size_t s = 0; s < n; ++s) {
        for (std::size_t f = 0; f < 3; ++f) x[s * 3 + f] = 4 * rng.uniform() + 10;  // badly scaled inputs
        y[s] = std::sin(x[s * 3] - 12) + 0.5 * (x[s * 3 + 1] - 12);
    }
    std::vector<double> p(Net::num_params), g(p.size());
    init_params<Net>(p, 1);
    const double before = value_and_gradient<Net>(p, g, x, y, SquaredError{});
    Adam opt(1e-2);
    FitOptions o;
    o.epochs = 400;
    fit<Net>(p, SquaredError{}, x, y, opt, o);
    const double after = value_and_gradient<Net>(p, g, x, y, SquaredError{});
    INFO("loss before " << before << ", after " << after);
    REQUIRE(after < 0.05 * before);

    REQUIRE(architecture<Net>::text() == "Input[3] ScaleShift Dense[16,tanh] Dense[1,identity]");
    std::vector<double> q(p.size()), r(p.size());
    load_checkpoint_bytes<Net>(checkpoint_bytes<Net>(p), "memory", q);
    REQUIRE(q == p);
    import_safetensors_bytes<Net>(safetensors_bytes<Net>(p), "memory", r);
    REQUIRE(r == p);
    REQUIRE(architecture<Net>::torch_tensors()[0].name == "0.scale");
}

// A user layer with fixed parameters (layer.hpp, num_fixed_params): y = a .* x + b with a fixed, drawn in
// [0.5, 1.5) at init, and b trained. Parameters: b, then a (the last in_size entries). AddsToFixed = true
// gives the broken twin whose pullbacks also add a's gradient, which the checker must refuse.
template <bool AddsToFixed>
struct FixedScaleOf {
    template <class InShape>
    struct bound {
        static constexpr std::size_t in_size = InShape::size, out_size = InShape::size;
        using out_shape = InShape;
        static constexpr std::size_t num_params = 2 * in_size, num_fixed_params = in_size;
        static constexpr std::size_t saved_per_sample = 0, scratch_per_sample = 0;
        template <class T>
        static void init(std::span<T> p, Rng& rng, InitKind) {
            for (std::size_t f = 0; f < in_size; ++f) {
                p[f] = T(0);
                p[in_size + f] = static_cast<T>(0.5 + rng.uniform());
            }
        }
        template <class T>
        static void forward(const T* p, const T* x, T* y, T*, std::size_t n) {
            for (std::size_t f = 0; f < in_size; ++f)
                for (std::size_t s = 0; s < n; ++s) y[f * n + s] = p[in_size + f] * x[f * n + s] + p[f];
        }
        // db += sum_s dy, dx = a .* dy; a is fixed: nothing added for it.
        template <class T>
        static void pullback(const T* p, T* g, const T* x, const T*, T*, T*, T* dy, T* dx, std::size_t n) {
            for (std::size_t f = 0; f < in_size; ++f)
                for (std::size_t s = 0; s < n; ++s) {
                    g[f] += dy[f * n + s];
                    if constexpr (AddsToFixed) g[in_size + f] += dy[f * n + s] * x[f * n + s];
                    if (dx) dx[f * n + s] = p[in_size + f] * dy[f * n + s];
                }
        }
        static std::string describe() { return "FixedScale"; }
        // y_c = a .* x_c in every column, plus b in column 0; db += sum_s ybar_0, xbar_c = a .* ybar_c.
        struct jet_rule {
            using layer = bound;
            static constexpr std::size_t saved = 0, scratch = 0;
            template <class T>
            static void forward(const T* p, const T* x, T* y, T*, std::size_t m, const JetColumns& cols) {
                for (std::size_t f = 0; f < in_size; ++f)
                    for (std::size_t c = 0; c < cols.C; ++c)
                        for (std::size_t s = 0; s < m; ++s) {
                            const std::size_t i = (f * cols.C + c) * m + s;
                            y[i] = p[in_size + f] * x[i] + (c == 0 ? p[f] : T(0));
                        }
            }
            template <class T>
            static void pullback(const T* p, T* g, const T* x, const T*, T*, T* ybar, T* xbar, std::size_t m,
                                 const JetColumns& cols) {
                for (std::size_t f = 0; f < in_size; ++f)
                    for (std::size_t c = 0; c < cols.C; ++c)
                        for (std::size_t s = 0; s < m; ++s) {
                            const std::size_t i = (f * cols.C + c) * m + s;
                            if (c == 0) g[f] += ybar[i];
                            if constexpr (AddsToFixed) g[in_size + f] += ybar[i] * x[i];
                            if (xbar) xbar[i] = p[in_size + f] * ybar[i];
                        }
            }
        };
        // v is 0 at a: Ry = vb + a .* Rx; gb += ybar, hv_b += R ybar, xbar = a .* ybar, R xbar = a .* R ybar.
        struct hvp_rule {
            using layer = bound;
            static constexpr std::size_t saved = 0, scratch = 0;
            template <class T>
            static void forward(const T* p, const T* v, const T* x, const T* rx, T* y, T* ry, T*, std::size_t m) {
                for (std::size_t f = 0; f < in_size; ++f)
                    for (std::size_t s = 0; s < m; ++s) {
                        const std::size_t i = f * m + s;
                        y[i] = p[in_size + f] * x[i] + p[f];
                        ry[i] = v[f] + (rx ? p[in_size + f] * rx[i] : T(0));
                    }
            }
            template <class T>
            static void pullback(const T* p, const T*, T* g, T* hv, const T* x, const T*, const T*, T*, T* ybar,
                                 T* rybar, T* xbar, T* rxbar, std::size_t m) {
                for (std::size_t f = 0; f < in_size; ++f)
                    for (std::size_t s = 0; s < m; ++s) {
                        const std::size_t i = f * m + s;
                        g[f] += ybar[i];
                        hv[f] += rybar[i];
                        if constexpr (AddsToFixed) g[in_size + f] += ybar[i] * x[i];
                        if (xbar) {
                            xbar[i] = p[in_size + f] * ybar[i];
                            rxbar[i] = p[in_size + f] * rybar[i];
                        }
                    }
            }
        };
    };
};
using FixedScale = FixedScaleOf<false>;

TEST_CASE("a layer with fixed parameters passes the checker, its rules included", "[user_layer][fixed][gradient]") {
    const auto r = check_layer<FixedScale, Input<5>>();
    INFO(r.report());
    REQUIRE(r.passed());
    REQUIRE(r.jet_rule_checked);
    REQUIRE(r.hvp_rule_checked);
}

TEST_CASE("a pullback or a rule that adds to a fixed parameter's gradient fails the checker", "[user_layer][fixed]") {
    const auto r = check_layer<FixedScaleOf<true>, Input<5>>();
    REQUIRE_FALSE(r.passed());
    const std::string report = r.report();
    INFO(report);
    REQUIRE(report.find("pullback added to the gradient of a fixed parameter") != std::string::npos);
    REQUIRE(report.find("jet_rule: the pullback added to the gradient of a fixed parameter") != std::string::npos);
    REQUIRE(report.find("hvp_rule: the pullback added to g or hv at a fixed parameter") != std::string::npos);
}

// Dense<4> [0, 16), FixedScale [16, 24) (a: [20, 24)), Residual<FixedScale> [24, 32) ([28, 32)),
// Parallel's Dense<2> [32, 42) and FixedScale [42, 50) ([46, 50)), Dense<1> [50, 57).
using FixedNet = Chain<Input<3>, Dense<4, Tanh>, FixedScale, Residual<FixedScale>,
                       Parallel<Concat, Branch<Dense<2, Tanh>>, Branch<FixedScale>>, Dense<1>>;

TEST_CASE("chains and containers say where their layers' fixed parameters are", "[user_layer][fixed]") {
    static_assert(FixedNet::num_params == 57 && FixedNet::num_fixed_params == 12);
    REQUIRE(fixed_param_ranges<FixedNet>() == std::vector<ParamRange>{{20, 4}, {28, 4}, {46, 4}});
    REQUIRE(fixed_param_ranges<Chain<Input<3>, Dense<4>>>().empty());
    const auto r = check_bound_layer<FixedNet>();
    INFO(r.report());
    REQUIRE(r.passed());
    REQUIRE(r.jet_rule_checked);
    REQUIRE(r.hvp_rule_checked);
}

TEST_CASE("fit with AdamW leaves fixed parameters as they are, bit for bit", "[user_layer][fixed][fit]") {
    const std::size_t n = 128;
    std::vector<double> x(n * 3), y(n);
    Rng rng(9);
    for (auto& e : x) e = 2 * rng.uniform() - 1;
    for (std::size_t s = 0; s < n; ++s) y[s] = x[s * 3] * x[s * 3 + 1] + 0.3 * x[s * 3 + 2];
    std::vector<double> p(FixedNet::num_params);
    init_params<FixedNet>(p, 3);
    const std::vector<double> p0 = p;
    const auto ranges = fixed_param_ranges<FixedNet>();
    auto fixed_same = [&](const std::vector<double>& q) {
        for (const ParamRange& r : ranges)
            for (std::size_t i = r.first; i < r.first + r.count; ++i)
                if (q[i] != p0[i]) return false;
        return true;
    };
    AdamW opt(1e-2, 0.1);
    FitOptions o;
    o.epochs = 20;
    o.batch = 32;
    fit<FixedNet>(p, SquaredError{}, x, y, opt, o);
    REQUIRE(fixed_same(p));
    REQUIRE(p[0] != p0[0]);  // the trained ones moved
    REQUIRE(std::vector<ParamRange>(opt.fixed().begin(), opt.fixed().end()) == ranges);

    // Without keep_fixed, AdamW's decay moves them (their gradient is 0): what fit guards against.
    std::vector<double> q = p0, g(q.size());
    AdamW bare(1e-2, 0.1);
    value_and_gradient<FixedNet>(q, g, x, y, SquaredError{});
    for (const ParamRange& r : ranges)
        for (std::size_t i = r.first; i < r.first + r.count; ++i) REQUIRE(g[i] == 0.0);
    bare.step(q, g);
    REQUIRE_FALSE(fixed_same(q));
    REQUIRE_THROWS_WITH(bare.keep_fixed({{4, 2}, {5, 1}}), Catch::Contains("increasing order"));
}

}  // namespace test_user_layer
