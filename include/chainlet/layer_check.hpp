// check_layer<L, Input<...>>(): tests a layer against the contract of layer.hpp, numerically. Every
// built-in layer's test calls it; call it on your own layers too:
//
//   const auto r = chainlet::check_layer<MyLayer, chainlet::Input<7>>();
//   if (!r.passed()) std::cerr << r.report();
//
// For each chunk size n in the options it draws parameters, inputs and an output cotangent w, and checks
//   - the parameter and input gradients against central finite differences of sum(w .* forward(p, x)),
//     in double (the largest error relative to max(|fd|, floor, 1e-3 max |fd|));
//   - that the pullback adds into g (g starts non-zero) rather than overwriting it, and nothing at a fixed
//     parameter (layer.hpp, num_fixed_params; the finite differences leave those out, and the rule
//     checks below check the same of the rules, with v = 0 there);
//   - that a second pullback on the same forward gives the same dx and g (so x, y and saved are intact);
//   - that a null dx gives the same g;
//   - for a layer with the optional pullback_assign, in double and float: that with g full of NaN on
//     entry it writes the g and dx of the pullback (equal values, a zero's sign aside), with and without
//     dx, and leaves y and saved alone;
//   - for a layer with the optional cotangent_rows or pullback_from_rows, in double and float: that they
//     give the bits of the pullback, band by band (detail::check_cotangent_rows, check_pullback_from_rows);
//   - that forward reads no saved value and pullback no scratch value before writing it (both are filled
//     with NaN first), and that outputs and gradients are finite;
//   - that float and double agree on the same (float-exact) inputs, to float_tolerance relative to the
//     largest value of each result;
//   - for n >= 2, that samples are independent: with 3 copies of the first sample added to the chunk, their
//     cotangent zero, the chunk's own samples get the same y and dx and g the same sums (to 1e-12
//     relative, in double), and the copies a zero dx (the workspaces pad chunks this way); and that moving
//     one sample's input leaves the other samples' outputs as they were. Where this holds, the input
//     finite differences move one feature of every sample in one pass (n times fewer forward passes).
//   - for a layer with the derivative passes' rules (layer.hpp's jet_rule and hvp_rule), on a chunk of 17
//     samples, in double against finite differences of its own forward and pullback (tested above):
//       jet_rule: with 2 tangents and the second-derivative sets {0} and {0, 1}, on the input curve
//       x(t) = x0 + sum_i t_i d_i + 1/2 sum_i t_i^2 e_i (x's columns: x0, d_i, sum_{i in S} e_i), column 0
//       against forward(x0), tangent i against the central difference along t_i (at step and half of it,
//       extrapolated), column S against the sum over i in S of the second differences along t_i (at
//       second_step and half of it, extrapolated; second_tolerance; where the two disagree, the curve
//       crosses a kink and the entry is left out);
//       the pullback against central differences (at second_step and half of it, extrapolated) of
//       <ybar, the columns> in every parameter and input column (beyond 512 of them, along 4 random
//       directions; an entry that disagrees there is tried at second_step / 8 and half of it, then at a
//       64th, and left out where each two disagree as at a kink, up to an eighth of the entries or one
//       direction); that it adds into g and gives that g with xbar = nullptr;
//       hvp_rule: y against forward, Ry against the central difference along (v, Rx), with Rx given and
//       Rx = 0; g and xbar against the pullback, hv and R xbar against central differences of the
//       pullback along (v, Rx, R ybar) (each at step and half of it, extrapolated); that it adds into g
//       and hv and gives them with xbar = nullptr;
//     that the pullbacks leave x (and Rx) and saved as they were; that one sample alone (the jets: with
//     tangent 0 and the set {0} only) gives the chunk's values for it, forward and pullback (the
//     chunk's cotangents zero elsewhere); both forwards in float against double
//     (into float_double_difference), saved and scratch starting as NaN. A rule inherited from another
//     layer (its `layer` is not this one), or without `layer`, fails.
// Finite differences are only valid where the layer is smooth: random inputs keep ReLU and max pooling
// away from their kinks but for a step's width; the jet pullback's wide differences (second_step) meet
// MaxPool's ties, and the entries they cross are looked at again (extrapolated_gradient_error).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "chainlet/jet.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

namespace detail {
inline std::vector<std::size_t> layer_check_chunk_sizes() {
    std::vector<std::size_t> sizes(3);
    sizes[0] = 1;
    sizes[1] = 3;
    sizes[2] = 17;
    return sizes;
}
}  // namespace detail

struct LayerCheckOptions {
    // the one-sample route, a short chunk, vectors + tail. (Not a braced list: g++ 12 at -O3 with AVX-512
    // warned -Wmaybe-uninitialized on the list's backing array where a test inlined the default options.)
    std::vector<std::size_t> chunk_sizes = detail::layer_check_chunk_sizes();
    std::uint64_t seed = 1;
    double param_scale = 0.5;   // parameters ~ N(0, param_scale^2)
    double input_scale = 1.0;   // inputs ~ N(0, input_scale^2)
    double step = 1e-5;         // of the central differences
    double tolerance = 1e-6;    // on the finite-difference errors
    double floor = 1e-3;        // smallest denominator of a relative finite-difference error
    double float_tolerance = 2e-4;
    double second_step = 1e-3;        // of the second differences (the jet rule's second columns), and half of it
    double second_tolerance = 1e-5;   // on their errors
    Pass pass{};                // what forward is told (e.g. training, for Dropout)
};

struct LayerCheckResult {
    double parameter_gradient_error = 0;  // worst over the chunk sizes
    double input_gradient_error = 0;
    double float_double_difference = 0;
    // The derivative passes' rules (layer.hpp), where the layer has them: the worst finite-difference error.
    // unavailable: declared, but not for these template arguments or parts (layer.hpp's `available`): left out.
    bool jet_rule_checked = false, hvp_rule_checked = false, jet_rule_unavailable = false, hvp_rule_unavailable = false;
    double jet_rule_error = 0, hvp_rule_error = 0;
    std::vector<std::string> failures;  // one line each; empty when the layer passed

    bool passed() const { return failures.empty(); }
    std::string report() const {
        std::ostringstream s;
        s << "parameter gradient error " << parameter_gradient_error << ", input gradient error "
          << input_gradient_error << ", float vs double " << float_double_difference;
        if (jet_rule_checked) s << ", jet rule " << jet_rule_error;
        if (hvp_rule_checked) s << ", hvp rule " << hvp_rule_error;
        if (jet_rule_unavailable || hvp_rule_unavailable) s << " (a declared rule is unavailable here: not checked)";
        s << "\n";
        for (const auto& f : failures) s << "  " << f << "\n";
        return s.str();
    }
};

namespace detail {

struct LayerCheckRun {
    std::vector<double> y, dx, g;
};

template <class T>
std::vector<T> fill_normal(std::size_t n, Rng& rng, double scale) {
    std::vector<T> v(n);
    for (auto& e : v) e = static_cast<T>(static_cast<float>(scale * rng.normal()));  // exact in float too
    return v;
}

// max(worst, e) for the worst error of a check, where a NaN e makes it infinite: std::max(worst, NaN)
// returns worst, so a NaN error would pass a bound.
inline double worse(double worst, double e) {
    return std::isnan(e) ? std::numeric_limits<double>::infinity() : std::max(worst, e);
}

// The largest difference of a from ref relative to max(max |ref|, 1); infinite where an entry is NaN in
// one of them (through worse: a float result NaN where the double one is not would otherwise pass).
inline double worst_relative(const std::vector<double>& a, const std::vector<double>& ref) {
    double largest = 0, worst = 0;
    for (double r : ref) largest = std::max(largest, std::abs(r));
    for (std::size_t i = 0; i < ref.size(); ++i) worst = worse(worst, std::abs(a[i] - ref[i]) / std::max(largest, 1.0));
    return worst;
}

// The worst error of a gradient against its central differences fd, each relative to
// max(|fd_i|, floor, 1e-3 max_j |fd_j|): the last term keeps rounding noise in components that are tiny
// next to the largest ones from counting as an error. Infinite if any error is NaN or infinite.
inline double finite_difference_error(const std::vector<double>& fd, const std::vector<double>& grad, double floor) {
    double largest = 0, worst = 0;
    for (double e : fd) largest = std::max(largest, std::abs(e));
    for (std::size_t i = 0; i < fd.size(); ++i)
        worst = worse(worst, std::abs(grad[i] - fd[i]) / std::max({std::abs(fd[i]), floor, 1e-3 * largest}));
    return worst;
}

// The central differences of a scalar function f(v) in every component of v, at step h; extrapolated from
// h and h / 2 (Richardson, error O(h^4) instead of O(h^2)) when asked.
// The parameters a check differentiates: B's entries but its fixed ones (layer.hpp, num_fixed_params),
// whose gradient must stay exactly as it was.
template <class B>
std::vector<std::size_t> free_params() {
    std::vector<std::size_t> free;
    for (std::size_t i = 0; i < B::num_params; ++i)
        if (!is_fixed_param<B>(i)) free.push_back(i);
    return free;
}
inline std::vector<double> gather(const std::vector<double>& a, const std::vector<std::size_t>& at) {
    std::vector<double> r(at.size());
    for (std::size_t k = 0; k < at.size(); ++k) r[k] = a[at[k]];
    return r;
}
// a with its entries at `at` replaced by q's.
inline std::vector<double> scatter(std::vector<double> a, const std::vector<std::size_t>& at, const std::vector<double>& q) {
    for (std::size_t k = 0; k < at.size(); ++k) a[at[k]] = q[k];
    return a;
}
// Whether g moved at a fixed entry of B (from g0; both of the slice's size).
template <class B>
bool moved_fixed(const std::vector<double>& g, const std::vector<double>& g0) {
    for (std::size_t i = 0; i < B::num_params; ++i)
        if (is_fixed_param<B>(i) && !(g[i] == g0[i])) return true;
    return false;
}

template <class F>
std::vector<double> central_differences(std::vector<double> v, F&& f, double h, bool extrapolate) {
    std::vector<double> fd(v.size());
    auto along = [&](std::size_t i, double t) {
        const double keep = v[i];
        v[i] = keep + t;
        const double up = f(v);
        v[i] = keep - t;
        const double down = f(v);
        v[i] = keep;
        return (up - down) / (2 * t);
    };
    for (std::size_t i = 0; i < v.size(); ++i) fd[i] = extrapolate ? (4 * along(i, h / 2) - along(i, h)) / 3 : along(i, h);
    return fd;
}

// The error of grad against the extrapolated central differences (at h and h / 2) of f at v: in every
// component when v has at most 512 of them; otherwise along 4 random directions u, <grad, u> against
// the difference along u, relative to max(|fd|, floor, 1e-3 sum_i |grad_i u_i|). (Componentwise, a
// layer of P parameters costs P forward passes of cost ~P each; a wrong component shows along almost
// every direction.) Where an entry disagrees by more than tolerance, its differences are taken again at
// `fine` and half of it: a kink of a piecewise-linear layer (a tie in MaxPool's window) within h of v
// spoils the wide ones, and the entry agrees if the fine ones do; where the two fine ones disagree with
// each other too (by 1e-2 of their size, as the second columns' kink test), the kink lies within `fine`,
// and the same is tried at fine / 8; where those disagree too, the entry is left out, counted in `kinked`. A wrong rule still fails: both differences are
// estimates of the same derivative, and neither agrees with it.
inline constexpr std::size_t componentwise_differences = 512, difference_directions = 4;
template <class F>
double extrapolated_gradient_error(const std::vector<double>& v, const std::vector<double>& grad, F&& f, double h,
                                   double fine, double floor, double tolerance, Rng& rng, std::size_t& kinked) {
    constexpr std::size_t componentwise = componentwise_differences, directions = difference_directions;
    std::vector<double> w(v.size());
    // the central difference of f along u (a unit vector when u is null and i its component) at step t
    auto difference = [&](const std::vector<double>* u, std::size_t i, double t) {
        auto at = [&](double s) {
            w = v;
            if (u)
                for (std::size_t j = 0; j < v.size(); ++j) w[j] += s * (*u)[j];
            else
                w[i] += s;
            return f(w);
        };
        return (at(t) - at(-t)) / (2 * t);
    };
    auto extrapolated = [&](const std::vector<double>* u, std::size_t i, double t) {
        return (4 * difference(u, i, t / 2) - difference(u, i, t)) / 3;
    };
    // the differences at t and half of it along u (or component i), extrapolated, for t = fine and then
    // fine / 8 where the two at fine disagree as at a kink within fine; none where both do
    auto fine_difference = [&](const std::vector<double>* u, std::size_t i) -> std::optional<double> {
        for (const double t : {fine, fine / 8}) {
            const double wide = difference(u, i, t), narrow = difference(u, i, t / 2);
            if (!std::isfinite(wide) || !std::isfinite(narrow) ||
                std::abs(narrow - wide) <= 1e-2 * std::max({std::abs(narrow), std::abs(wide), 1.0}))
                return (4 * narrow - wide) / 3;
        }
        return std::nullopt;
    };
    auto relative = [&](double dot, double fd, double scale) {
        return std::abs(dot - fd) / std::max({std::abs(fd), floor, scale});
    };
    double worst = 0;
    if (v.size() <= componentwise) {
        // Two passes: a difference across a kink is huge (a jump over 2h) and would raise the scale
        // 1e-3 max |fd| of every other entry, so the scale leaves out the entries found kinked.
        const auto fd = central_differences(v, f, h, true);
        auto largest_kept = [&](const std::vector<char>& out) {
            double largest = 0;
            for (std::size_t i = 0; i < v.size(); ++i)
                if (!out[i]) largest = std::max(largest, std::abs(fd[i]));
            return largest;
        };
        std::vector<char> out(v.size(), 0), taken(v.size(), 0);
        std::vector<std::optional<double>> fd_fine(v.size());
        const double largest_all = largest_kept(out);
        for (std::size_t i = 0; i < v.size(); ++i)
            if (relative(grad[i], fd[i], 1e-3 * largest_all) > tolerance) {
                fd_fine[i] = fine_difference(nullptr, i);
                taken[i] = 1;
                if (!fd_fine[i]) out[i] = 1, ++kinked;
            }
        const double largest = largest_kept(out);
        for (std::size_t i = 0; i < v.size(); ++i) {
            if (out[i]) continue;
            double e = relative(grad[i], fd[i], 1e-3 * largest);
            if (e > tolerance) {
                if (!taken[i]) fd_fine[i] = fine_difference(nullptr, i);
                if (!fd_fine[i]) {
                    ++kinked;
                    continue;
                }
                e = std::min(e, relative(grad[i], *fd_fine[i], 1e-3 * largest));
            }
            worst = worse(worst, e);
        }
        return worst;
    }
    for (std::size_t k = 0; k < directions; ++k) {
        const auto u = fill_normal<double>(v.size(), rng, 1.0);
        double dot = 0, scale = 0;
        for (std::size_t i = 0; i < v.size(); ++i) dot += grad[i] * u[i], scale += std::abs(grad[i] * u[i]);
        double e = relative(dot, extrapolated(&u, 0, h), 1e-3 * scale);
        if (e > tolerance) {
            const auto fd_fine = fine_difference(&u, 0);
            if (!fd_fine) ++kinked, e = 0;
            else e = std::min(e, relative(dot, *fd_fine, 1e-3 * scale));
        }
        worst = worse(worst, e);
    }
    return worst;
}

inline bool all_finite(const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [](double e) { return std::isfinite(e); });
}

// Equal element by element, two NaN counting as equal: unused saved storage keeps the NaN it was
// filled with, and a pullback must leave it, as everything else it only reads, as it was.
template <class T>
bool same_values(const std::vector<T>& a, const std::vector<T>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](T u, T v) { return u == v || (std::isnan(u) && std::isnan(v)); });
}

// One forward and pullback in T; g starts at g0, dx and scratch at NaN, saved at NaN before forward.
template <class B, class T>
LayerCheckRun layer_run(const std::vector<double>& p, const std::vector<double>& x, const std::vector<double>& w,
                        const std::vector<double>& g0, std::size_t n, const Pass& pass) {
    const T nan = std::numeric_limits<T>::quiet_NaN();
    std::vector<T> pt(p.begin(), p.end()), xt(x.begin(), x.end()), dy(w.begin(), w.end()), g(g0.begin(), g0.end());
    std::vector<T> y(B::out_size * n), dx(B::in_size * n, nan);
    std::vector<T> saved(B::saved_per_sample * n + 1, nan), scratch(B::scratch_per_sample * n + 1, nan);
    layer_forward<B>(pt.data(), xt.data(), y.data(), saved.data(), n, pass);
    B::pullback(pt.data(), g.data(), xt.data(), y.data(), saved.data(), scratch.data(), dy.data(), dx.data(), n);
    return {std::vector<double>(y.begin(), y.end()), std::vector<double>(dx.begin(), dx.end()),
            std::vector<double>(g.begin(), g.end())};
}

// The optional pullback_assign in T against the pullback: with g full of NaN on entry it must write
// the g that the pullback adds onto zeros, and the same dx, with and without dx, leaving y and saved
// as they were. Equal values are required (==): a zero may differ in sign (x * 0 is -0 for x < 0,
// where 0 + -0 is +0). Returns what went wrong, or nothing.
template <class B, class T>
std::string check_pullback_assign(const std::vector<double>& p, const std::vector<double>& x,
                                  const std::vector<double>& w, std::size_t n, const Pass& pass) {
    const T nan = std::numeric_limits<T>::quiet_NaN();
    std::vector<T> pt(p.begin(), p.end()), xt(x.begin(), x.end());
    std::vector<T> y(B::out_size * n), saved(B::saved_per_sample * n + 1, nan);
    layer_forward<B>(pt.data(), xt.data(), y.data(), saved.data(), n, pass);
    const std::vector<T> y_kept = y, saved_kept = saved;
    auto run = [&](bool assign, bool with_dx) {
        std::vector<T> g(B::num_params, assign ? nan : T(0)), dy(w.begin(), w.end()), dx(B::in_size * n, nan),
            scratch(B::scratch_per_sample * n + 1, nan);
        T* const dxp = with_dx ? dx.data() : nullptr;
        if (assign)
            B::pullback_assign(pt.data(), g.data(), xt.data(), y.data(), saved.data(), scratch.data(), dy.data(), dxp, n);
        else
            B::pullback(pt.data(), g.data(), xt.data(), y.data(), saved.data(), scratch.data(), dy.data(), dxp, n);
        return std::pair{std::move(g), std::move(dx)};
    };
    const auto added = run(false, true), written = run(true, true), written_no_dx = run(true, false);
    if (y != y_kept || !same_values(saved, saved_kept)) return "pullback_assign changed y or the saved storage";
    if (written.first != added.first || written_no_dx.first != added.first)
        return "pullback_assign wrote another parameter gradient than the pullback adds";
    if (written.second != added.second) return "pullback_assign gave another dx than the pullback";
    return {};
}

// The optional cotangent_rows (layer.hpp) in T against the pullback's dx: bands of 1, 2 and 3 row blocks
// (the last one ending at the input height) must give the pullback's dx bit for bit, each written within
// its band.
template <class B, class T>
std::string check_cotangent_rows(const std::vector<double>& p, const std::vector<double>& x,
                                 const std::vector<double>& w, std::size_t n, const Pass& pass) {
    const T nan = std::numeric_limits<T>::quiet_NaN();
    std::vector<T> pt(p.begin(), p.end()), xt(x.begin(), x.end()), y(B::out_size * n);
    std::vector<T> saved(B::saved_per_sample * n + 1, nan), scratch(B::scratch_per_sample * n + 1, nan);
    layer_forward<B>(pt.data(), xt.data(), y.data(), saved.data(), n, pass);
    const std::vector<T> dy(w.begin(), w.end());
    std::vector<T> dy_clobbered = dy, dx(B::in_size * n, nan), g(B::num_params, T(0));
    B::pullback(pt.data(), g.data(), xt.data(), y.data(), saved.data(), scratch.data(), dy_clobbered.data(), dx.data(), n);
    constexpr std::size_t H = B::in_shape::dims[0], block = B::cotangent_row_block;
    static_assert(block >= 1, "cotangent_row_block must be at least 1");
    const std::size_t row = B::in_size / H * n;
    for (const std::size_t blocks : {1, 2, 3}) {
        std::vector<T> bands(B::in_size * n, nan);
        for (std::size_t r0 = 0; r0 < H; r0 += blocks * block) {
            const std::size_t r1 = std::min(H, r0 + blocks * block);
            std::vector<T> band((r1 - r0) * row + 1, nan);
            B::cotangent_rows(static_cast<const T*>(xt.data()), static_cast<const T*>(y.data()), dy.data(), band.data(),
                              r0, r1, n);
            if (!std::isnan(band.back())) return "cotangent_rows wrote past the end of its band";
            std::copy_n(band.begin(), (r1 - r0) * row, bands.begin() + static_cast<std::ptrdiff_t>(r0 * row));
        }
        if (!same_values(bands, dx))
            return "cotangent_rows in bands of " + std::to_string(blocks * block) +
                   " rows gave another input cotangent than the pullback";
    }
    return {};
}

// The optional pullback_from_rows (layer.hpp) in T against rows(0, height, dy) followed by the pullback:
// with the output cotangent w handed out by rows, for row blocks of 1, 2 and 3 rows, with and without dx,
// g (starting at g0) and dx must come out bit for bit the same; every request [r0, r1) must keep the rule
// (r0 a multiple of the block, r1 one too or the height) and every row must be requested.
template <class B, class T>
std::string check_pullback_from_rows(const std::vector<double>& p, const std::vector<double>& x,
                                     const std::vector<double>& w, const std::vector<double>& g0, std::size_t n,
                                     const Pass& pass) {
    const T nan = std::numeric_limits<T>::quiet_NaN();
    std::vector<T> pt(p.begin(), p.end()), xt(x.begin(), x.end()), y(B::out_size * n);
    std::vector<T> saved(B::saved_per_sample * n + 1, nan);
    layer_forward<B>(pt.data(), xt.data(), y.data(), saved.data(), n, pass);
    constexpr std::size_t OH = B::out_shape::dims[0];
    const std::size_t row = B::out_size / OH * n;
    for (const bool with_dx : {true, false}) {
        auto run = [&](std::size_t block) {
            std::vector<T> g(g0.begin(), g0.end()), dx(B::in_size * n, nan), scratch(B::scratch_per_sample * n + 1, nan);
            std::vector<T> dy(B::out_size * n, nan);
            T* const dxp = with_dx ? dx.data() : nullptr;
            std::string bad;
            std::vector<int> seen(OH, 0);
            if (block == 0) {
                std::copy(w.begin(), w.end(), dy.begin());
                B::pullback(pt.data(), g.data(), xt.data(), y.data(), saved.data(), scratch.data(), dy.data(), dxp, n);
            } else {
                auto rows = [&](std::size_t r0, std::size_t r1, T* out) {
                    if (r0 % block != 0 || (r1 % block != 0 && r1 != OH) || r0 >= r1 || r1 > OH) {
                        bad = "pullback_from_rows asked for rows [" + std::to_string(r0) + ", " + std::to_string(r1) +
                              ") with a row block of " + std::to_string(block);
                        return;
                    }
                    std::copy(w.begin() + static_cast<std::ptrdiff_t>(r0 * row),
                              w.begin() + static_cast<std::ptrdiff_t>(r1 * row), out);
                    for (std::size_t r = r0; r < r1; ++r) ++seen[r];
                };
                B::pullback_from_rows(pt.data(), g.data(), xt.data(), y.data(), saved.data(), scratch.data(), dy.data(),
                                      dxp, n, rows, block);
                if (bad.empty() && std::count(seen.begin(), seen.end(), 0) > 0)
                    bad = "pullback_from_rows did not ask for every row of its output cotangent";
            }
            return std::tuple{std::move(g), std::move(dx), std::move(bad)};
        };
        const auto [g_ref, dx_ref, unused] = run(0);
        for (const std::size_t block : {1, 2, 3}) {
            const auto [g, dx, bad] = run(block);
            if (!bad.empty()) return bad;
            if (!same_values(g, g_ref) || !same_values(dx, dx_ref))
                return "pullback_from_rows with a row block of " + std::to_string(block) +
                       " gave another gradient than the pullback" + (with_dx ? "" : " (dx = nullptr)");
        }
    }
    return {};
}

// The samples of a chunk must not see each other (the workspaces pad a chunk with copies of one of its
// samples, whose cotangent is zero, and predict a few samples one at a time): with `copies` copies of
// sample 0 appended, samples 0..n-1 must get the same y and dx and g the same sums, and the copies dx = 0.
template <class B>
std::string check_independent_samples(const std::vector<double>& p, const std::vector<double>& x,
                                      const std::vector<double>& w, std::size_t n, const Pass& pass) {
    constexpr std::size_t copies = 3;
    const std::size_t np = n + copies;
    auto widen = [&](const std::vector<double>& v, std::size_t features, bool copy_first) {
        std::vector<double> out(features * np, 0.0);
        for (std::size_t f = 0; f < features; ++f)
            for (std::size_t s = 0; s < np; ++s)
                out[f * np + s] = s < n ? v[f * n + s] : copy_first ? v[f * n] : 0.0;
        return out;
    };
    const std::vector<double> zeros(B::num_params, 0.0);
    const auto alone = layer_run<B, double>(p, x, w, zeros, n, pass);
    const auto padded = layer_run<B, double>(p, widen(x, B::in_size, true), widen(w, B::out_size, false), zeros, np, pass);
    auto own = [&](const std::vector<double>& v, std::size_t features) {
        std::vector<double> out(features * n);
        for (std::size_t f = 0; f < features; ++f)
            for (std::size_t s = 0; s < n; ++s) out[f * n + s] = v[f * np + s];
        return out;
    };
    if (worst_relative(own(padded.y, B::out_size), alone.y) > 1e-12)
        return "a sample's output changed when copies of another sample joined the chunk (samples must be independent)";
    if (worst_relative(own(padded.dx, B::in_size), alone.dx) > 1e-12 || worst_relative(padded.g, alone.g) > 1e-12)
        return "the gradients of a chunk changed when copies of a sample with zero cotangent joined it (samples must be "
               "independent, and the pullback linear in dy)";
    for (std::size_t f = 0; f < B::in_size; ++f)
        for (std::size_t s = n; s < np; ++s)
            if (!(padded.dx[f * np + s] == 0.0)) return "a sample with zero cotangent got a non-zero input gradient";
    // One sample's input changed, every feature at once: the other samples' outputs must stay as they were
    // (the copies above leave a dependence on a later sample unseen). The input finite differences rely on
    // this to move one feature of every sample in one forward pass.
    std::vector<double> moved = x, y_moved(B::out_size * n), saved(B::saved_per_sample * n + 1);
    for (std::size_t s = 0; s < n; ++s) {
        for (std::size_t f = 0; f < B::in_size; ++f) moved[f * n + s] = x[f * n + s] + 0.5 + 0.25 * std::abs(x[f * n + s]);
        layer_forward<B>(p.data(), moved.data(), y_moved.data(), saved.data(), n, pass);
        for (std::size_t f = 0; f < B::out_size; ++f)
            for (std::size_t other = 0; other < n; ++other)
                if (other != s && !(std::abs(y_moved[f * n + other] - alone.y[f * n + other]) <=
                                    1e-12 * std::max(std::abs(alone.y[f * n + other]), 1.0)))
                    return "a sample's output changed when another sample's input changed (samples must be independent)";
        for (std::size_t f = 0; f < B::in_size; ++f) moved[f * n + s] = x[f * n + s];
    }
    return {};
}

// What check_layer does with a layer's rule of each pass: none declared, its own to check, declared but
// unavailable for these template arguments (layer.hpp), or inherited from another layer (a failure).
enum class RuleState { none, own, unavailable, inherited, without_layer };

template <class B, bool Jet>
constexpr RuleState rule_state() {
    if constexpr (Jet && requires { typename B::jet_rule; }) {
        if constexpr (!requires { typename B::jet_rule::layer; }) return RuleState::without_layer;
        else if constexpr (!std::is_same_v<typename B::jet_rule::layer, B>) return RuleState::inherited;
        else return rule_available<typename B::jet_rule>() ? RuleState::own : RuleState::unavailable;
    } else if constexpr (!Jet && requires { typename B::hvp_rule; }) {
        if constexpr (!requires { typename B::hvp_rule::layer; }) return RuleState::without_layer;
        else if constexpr (!std::is_same_v<typename B::hvp_rule::layer, B>) return RuleState::inherited;
        else return rule_available<typename B::hvp_rule>() ? RuleState::own : RuleState::unavailable;
    } else {
        return RuleState::none;
    }
}

struct RuleCheckOutcome {
    double error = 0;  // the worst finite-difference error
    double float_double_difference = 0;
    std::vector<std::string> failures;
    void fail(const std::string& what) { failures.push_back(what); }
};

// The jet columns the check uses: D = 2 tangents, second-derivative sets {0} and {0, 1}.
struct JetCheckColumns {
    static constexpr std::size_t D = 2, K = 2, C = 1 + D + K;
    std::vector<std::vector<std::size_t>> second{{0}, {0, 1}}, containing{{0, 1}, {1}};
    JetColumns cols() const { return {D, C, second, containing}; }
};

template <class B, class T>
std::vector<double> jet_forward(const std::vector<double>& p, const std::vector<double>& x, const JetCheckColumns& jc,
                                std::size_t m) {
    using Rule = typename B::jet_rule;
    const T nan = std::numeric_limits<T>::quiet_NaN();
    std::vector<T> pt(p.begin(), p.end()), xt(x.begin(), x.end()), y(B::out_size * jc.C * m, nan);
    std::vector<T> saved(Rule::saved * jc.C * m + 1, nan);
    Rule::forward(static_cast<const T*>(pt.data()), static_cast<const T*>(xt.data()), y.data(), saved.data(), m, jc.cols());
    return {y.begin(), y.end()};
}

template <class B>
RuleCheckOutcome check_jet_rule(const LayerCheckOptions& o) {
    using Rule = typename B::jet_rule;
    constexpr std::size_t m = 17, In = B::in_size, Out = B::out_size, P = B::num_params;
    const JetCheckColumns jc;
    constexpr std::size_t D = JetCheckColumns::D, K = JetCheckColumns::K, C = JetCheckColumns::C;
    RuleCheckOutcome r;
    Rng rng(o.seed * 7919 + 17);
    const auto p = fill_normal<double>(P, rng, o.param_scale);
    const auto x0 = fill_normal<double>(In * m, rng, o.input_scale);
    std::vector<std::vector<double>> d(D), e(D);
    for (std::size_t i = 0; i < D; ++i) {
        d[i] = fill_normal<double>(In * m, rng, 1.0);
        e[i] = fill_normal<double>(In * m, rng, 0.5);
    }
    std::vector<double> x(In * C * m, 0.0);
    for (std::size_t f = 0; f < In; ++f)
        for (std::size_t s = 0; s < m; ++s) {
            x[(f * C) * m + s] = x0[f * m + s];
            for (std::size_t i = 0; i < D; ++i) x[(f * C + 1 + i) * m + s] = d[i][f * m + s];
            for (std::size_t k = 0; k < K; ++k)
                for (auto i : jc.second[k]) x[(f * C + 1 + D + k) * m + s] += e[i][f * m + s];
        }
    const auto y = jet_forward<B, double>(p, x, jc, m);
    if (!all_finite(y)) r.fail("jet_rule: forward gave a non-finite column (or read saved storage before writing it)");

    // The columns against differences of the layer's forward along the curve.
    std::vector<double> ys(Out * m), saved(B::saved_per_sample * m + 1);
    auto along = [&](std::size_t i, double t) {
        std::vector<double> xt(In * m);
        for (std::size_t j = 0; j < In * m; ++j) xt[j] = x0[j] + t * d[i][j] + 0.5 * t * t * e[i][j];
        layer_forward<B>(p.data(), xt.data(), ys.data(), saved.data(), m, Pass{});
        return ys;
    };
    const auto y0 = along(0, 0.0);
    std::vector<double> value(Out * m), value_fd(Out * m), tangent(Out * D * m), tangent_fd(Out * D * m),
        second(Out * K * m), second_fd(Out * K * m, 0.0);
    std::vector<char> kinked(Out * K * m, 0);
    for (std::size_t f = 0; f < Out; ++f)
        for (std::size_t s = 0; s < m; ++s) {
            value[f * m + s] = y[(f * C) * m + s];
            value_fd[f * m + s] = y0[f * m + s];
        }
    for (std::size_t i = 0; i < D; ++i) {
        const auto up = along(i, o.step), down = along(i, -o.step);
        const auto up_half = along(i, o.step / 2), down_half = along(i, -o.step / 2);
        const double h = o.second_step;
        const auto up2 = along(i, h), down2 = along(i, -h), up1 = along(i, h / 2), down1 = along(i, -h / 2);
        for (std::size_t f = 0; f < Out; ++f)
            for (std::size_t s = 0; s < m; ++s) {
                const std::size_t at = f * m + s;
                tangent[(f * D + i) * m + s] = y[(f * C + 1 + i) * m + s];
                // at step and half of it, extrapolated: a high-frequency layer (FourierFeatures, Sin) has
                // third derivatives whose O(h^2) term reaches the tolerance at step alone
                tangent_fd[(f * D + i) * m + s] =
                    (4 * (up_half[at] - down_half[at]) / o.step - (up[at] - down[at]) / (2 * o.step)) / 3;
                // second differences at h and h / 2, extrapolated (Richardson): error O(h^4), not O(h^2)
                // Where the two disagree, the curve crosses a kink (ReLU's, at distance below h): the
                // differences mean nothing there, and the rule's own value stands in for them.
                const double wide = (up2[at] - 2 * y0[at] + down2[at]) / (h * h);
                const double narrow = (up1[at] - 2 * y0[at] + down1[at]) / (h * h / 4);
                const bool kink = std::isfinite(narrow) && std::isfinite(wide) &&
                                  std::abs(narrow - wide) > 1e-2 * std::max({std::abs(narrow), std::abs(wide), 1.0});
                for (std::size_t k = 0; k < K; ++k)
                    for (auto j : jc.second[k])
                        if (j == i) {
                            second_fd[(f * K + k) * m + s] += (4 * narrow - wide) / 3;
                            if (kink) kinked[(f * K + k) * m + s] = 1;
                        }
            }
    }
    for (std::size_t f = 0; f < Out; ++f)
        for (std::size_t k = 0; k < K; ++k)
            for (std::size_t s = 0; s < m; ++s) {
                const std::size_t at = (f * K + k) * m + s;
                second[at] = y[(f * C + 1 + D + k) * m + s];
                if (kinked[at]) second_fd[at] = second[at];
            }
    if (worst_relative(value, value_fd) > 1e-10) r.fail("jet_rule: column 0 differs from the layer's forward");
    const double et = finite_difference_error(tangent_fd, tangent, o.floor);
    const double es = finite_difference_error(second_fd, second, o.floor);
    r.error = worse(worse(r.error, et), es);
    if (!(et <= o.tolerance))
        r.fail("jet_rule: the tangent columns differ from finite differences by " + std::to_string(et));
    if (!(es <= o.second_tolerance))
        r.fail("jet_rule: the second-derivative columns differ from finite differences by " + std::to_string(es));

    // The pullback: the gradient of <ybar, forward's columns> in p and in x's columns.
    const auto ybar = fill_normal<double>(Out * C * m, rng, 1.0), g0 = fill_normal<double>(P, rng, 1.0);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    auto pull = [&](bool with_xbar) {
        std::vector<double> g = g0, xbar(In * C * m, nan), yb = ybar, scratch(Rule::scratch * C * m + 1, nan);
        std::vector<double> sv(Rule::saved * C * m + 1, nan), yy(Out * C * m);
        Rule::forward(static_cast<const double*>(p.data()), static_cast<const double*>(x.data()), yy.data(), sv.data(), m,
                      jc.cols());
        const std::vector<double> sv_kept = sv, x_kept = x;
        Rule::pullback(static_cast<const double*>(p.data()), g.data(), static_cast<const double*>(x.data()),
                       static_cast<const double*>(sv.data()), scratch.data(), yb.data(), with_xbar ? xbar.data() : nullptr,
                       m, jc.cols());
        if (!same_values(sv, sv_kept) || x != x_kept)
            r.fail("jet_rule: the pullback changed x's columns or the saved storage (containers read them after it)");
        for (std::size_t i = 0; i < P; ++i) g[i] -= g0[i];
        return std::pair{std::move(g), std::move(xbar)};
    };
    const auto [g, xbar] = pull(true);
    const auto g_no_xbar = pull(false).first;
    if (!all_finite(g) || !all_finite(xbar))
        r.fail("jet_rule: the pullback gave a non-finite cotangent (or read scratch before writing it)");
    if (worst_relative(g_no_xbar, g) > 1e-12) r.fail("jet_rule: a pullback with xbar = nullptr gave another g");
    auto phi = [&](const std::vector<double>& pp, const std::vector<double>& xx) {
        const auto yy = jet_forward<B, double>(pp, xx, jc, m);
        double sum = 0;
        for (std::size_t i = 0; i < yy.size(); ++i) sum += ybar[i] * yy[i];
        return sum;
    };
    // At second_step and half of it, extrapolated: the columns' sensitivities hold third derivatives of
    // the layer, whose O(h^2) term reaches the tolerance at step, and on 17 samples phi is large enough
    // that rounding at a step of 1e-5 does too.
    // An entry that disagrees is differenced again at an eighth of second_step (rounding stays below the
    // tolerance there, unlike at step); entries the differences cannot check (a kink within that:
    // extrapolated_gradient_error) are left out, and fail the check beyond an eighth of the entries or
    // one of the directions.
    Rng directions(o.seed * 7919 + 31);
    std::size_t kinked_p = 0, kinked_x = 0;
    const double fine = o.second_step / 8;
    const std::vector<std::size_t> free = free_params<B>();  // a fixed parameter's g must stay 0
    if (moved_fixed<B>(g, std::vector<double>(P, 0.0)))
        r.fail("jet_rule: the pullback added to the gradient of a fixed parameter (layer.hpp, num_fixed_params)");
    const double eg = extrapolated_gradient_error(
        gather(p, free), gather(g, free), [&](const std::vector<double>& q) { return phi(scatter(p, free, q), x); },
        o.second_step, fine, o.floor, o.tolerance, directions, kinked_p);
    const double ex = extrapolated_gradient_error(
        x, xbar, [&](const std::vector<double>& v) { return phi(p, v); }, o.second_step, fine, o.floor, o.tolerance,
        directions, kinked_x);
    r.error = worse(worse(r.error, eg), ex);
    const auto allowed = [](std::size_t entries) {
        return entries <= componentwise_differences ? entries / 8 : std::size_t(1);
    };
    if (kinked_p > allowed(free.size()) || kinked_x > allowed(x.size()))
        r.fail("jet_rule: the pullback's finite differences cross kinks at too many entries (" +
               std::to_string(kinked_p) + " of the parameters', " + std::to_string(kinked_x) +
               " of the inputs'; allowed: an eighth of the entries, or one of the directions beyond " +
               std::to_string(componentwise_differences) + ")");
    if (!(eg <= o.tolerance))
        r.fail("jet_rule: the pullback's parameter cotangent differs from finite differences by " + std::to_string(eg));
    if (!(ex <= o.tolerance))
        r.fail("jet_rule: the pullback's input cotangent differs from finite differences by " + std::to_string(ex));

    // One sample and fewer columns (a chunk's last sample; a pass without the second tangent): sample 0
    // alone with tangent 0 and the set {0} (C = 3) gives the chunk's values in those columns, forward and
    // pullback (the chunk's ybar zero in every other column and sample).
    {
        const std::vector<std::vector<std::size_t>> set0{{0}};
        const JetColumns small{1, 3, set0, set0};
        constexpr std::size_t map[3] = {0, 1, 1 + D};  // the small chunk's columns in the check's
        std::vector<double> x1(In * 3), yb1(Out * 3), ybar_full(Out * C * m, 0.0);
        for (std::size_t f = 0; f < In; ++f)
            for (std::size_t c = 0; c < 3; ++c) x1[f * 3 + c] = x[(f * C + map[c]) * m];
        Rng one(o.seed * 7919 + 37);
        for (std::size_t f = 0; f < Out; ++f)
            for (std::size_t c = 0; c < 3; ++c) yb1[f * 3 + c] = ybar_full[(f * C + map[c]) * m] = one.normal();
        std::vector<double> y1(Out * 3, nan), sv1(Rule::saved * 3 + 1, nan), scr1(Rule::scratch * 3 + 1, nan),
            g1(P, 0.0), xbar1(In * 3, nan);
        Rule::forward(static_cast<const double*>(p.data()), static_cast<const double*>(x1.data()), y1.data(), sv1.data(),
                      1, small);
        Rule::pullback(static_cast<const double*>(p.data()), g1.data(), static_cast<const double*>(x1.data()),
                       static_cast<const double*>(sv1.data()), scr1.data(), yb1.data(), xbar1.data(), 1, small);
        std::vector<double> sv(Rule::saved * C * m + 1, nan), yy(Out * C * m), scr(Rule::scratch * C * m + 1, nan),
            gf(P, 0.0), xbarf(In * C * m, nan);
        Rule::forward(static_cast<const double*>(p.data()), static_cast<const double*>(x.data()), yy.data(), sv.data(), m,
                      jc.cols());
        Rule::pullback(static_cast<const double*>(p.data()), gf.data(), static_cast<const double*>(x.data()),
                       static_cast<const double*>(sv.data()), scr.data(), ybar_full.data(), xbarf.data(), m, jc.cols());
        std::vector<double> y_ref(Out * 3), xbar_ref(In * 3);
        for (std::size_t f = 0; f < Out; ++f)
            for (std::size_t c = 0; c < 3; ++c) y_ref[f * 3 + c] = y[(f * C + map[c]) * m];
        for (std::size_t f = 0; f < In; ++f)
            for (std::size_t c = 0; c < 3; ++c) xbar_ref[f * 3 + c] = xbarf[(f * C + map[c]) * m];
        if (worst_relative(y1, y_ref) > 1e-12)
            r.fail("jet_rule: one sample with 3 columns gave other forward columns than the chunk of " + std::to_string(m));
        if (worst_relative(g1, gf) > 1e-12 || worst_relative(xbar1, xbar_ref) > 1e-12)
            r.fail("jet_rule: one sample with 3 columns gave another pullback than the chunk of " + std::to_string(m));
    }

    r.float_double_difference = worst_relative(jet_forward<B, float>(p, x, jc, m), y);
    if (!(r.float_double_difference <= o.float_tolerance))
        r.fail("jet_rule: float and double differ by " + std::to_string(r.float_double_difference));
    return r;
}

template <class B, class T>
std::pair<std::vector<double>, std::vector<double>> hvp_forward(const std::vector<double>& p, const std::vector<double>& v,
                                                                 const std::vector<double>& x,
                                                                 const std::vector<double>* rx, std::size_t m) {
    using Rule = typename B::hvp_rule;
    const T nan = std::numeric_limits<T>::quiet_NaN();
    std::vector<T> pt(p.begin(), p.end()), vt(v.begin(), v.end()), xt(x.begin(), x.end()), y(B::out_size * m, nan),
        ry(B::out_size * m, nan), saved(Rule::saved * m + 1, nan), rxt;
    if (rx) rxt.assign(rx->begin(), rx->end());
    Rule::forward(static_cast<const T*>(pt.data()), static_cast<const T*>(vt.data()), static_cast<const T*>(xt.data()),
                  rx ? static_cast<const T*>(rxt.data()) : static_cast<const T*>(nullptr), y.data(), ry.data(),
                  saved.data(), m);
    return {{y.begin(), y.end()}, {ry.begin(), ry.end()}};
}

template <class B>
RuleCheckOutcome check_hvp_rule(const LayerCheckOptions& o) {
    using Rule = typename B::hvp_rule;
    constexpr std::size_t m = 17, In = B::in_size, Out = B::out_size, P = B::num_params;
    RuleCheckOutcome r;
    Rng rng(o.seed * 7919 + 29);
    const auto p = fill_normal<double>(P, rng, o.param_scale);
    auto v = fill_normal<double>(P, rng, 1.0);
    for (std::size_t i = 0; i < P; ++i)
        if (is_fixed_param<B>(i)) v[i] = 0;  // v is 0 at a fixed parameter (layer.hpp)
    const auto x = fill_normal<double>(In * m, rng, o.input_scale), rx = fill_normal<double>(In * m, rng, 1.0);
    const auto ybar = fill_normal<double>(Out * m, rng, 1.0), rybar = fill_normal<double>(Out * m, rng, 1.0);
    const auto g0 = fill_normal<double>(P, rng, 1.0), hv0 = fill_normal<double>(P, rng, 1.0);
    const double nan = std::numeric_limits<double>::quiet_NaN();

    // The layer's own forward and pullback (from g = 0) at p + t v, x + t rx (with_rx), cotangent ybar + t rybar.
    auto moved = [&](const std::vector<double>& a, const std::vector<double>& da, double t) {
        std::vector<double> out(a.size());
        for (std::size_t i = 0; i < a.size(); ++i) out[i] = a[i] + t * da[i];
        return out;
    };
    auto layer_at = [&](double t, bool with_rx) {
        const auto pt = moved(p, v, t), xt = with_rx ? moved(x, rx, t) : x, dy0 = moved(ybar, rybar, t);
        std::vector<double> y(Out * m), saved(B::saved_per_sample * m + 1), scratch(B::scratch_per_sample * m + 1),
            g(P, 0.0), dx(In * m), dy = dy0;
        layer_forward<B>(pt.data(), xt.data(), y.data(), saved.data(), m, Pass{});
        const std::vector<double> y_out = y;
        B::pullback(pt.data(), g.data(), xt.data(), y.data(), saved.data(), scratch.data(), dy.data(), dx.data(), m);
        return std::tuple{y_out, g, dx};
    };
    // Central differences at step h and h / 2, extrapolated (Richardson): error O(h^4). The R-operator's
    // results are derivatives of whole pullbacks, whose O(h^2) error in a deep chain reaches the tolerance.
    auto central = [&](const std::vector<double>& up, const std::vector<double>& down, const std::vector<double>& up_half,
                       const std::vector<double>& down_half) {
        std::vector<double> fd(up.size());
        for (std::size_t i = 0; i < up.size(); ++i)
            fd[i] = (4 * (up_half[i] - down_half[i]) / o.step - (up[i] - down[i]) / (2 * o.step)) / 3;
        return fd;
    };
    for (const bool with_rx : {true, false}) {
        const std::string how = with_rx ? "" : " (Rx = 0)";
        const auto [y_ref, g_ref, dx_ref] = layer_at(0.0, with_rx);
        const auto [y_up, g_up, dx_up] = layer_at(o.step, with_rx);
        const auto [y_down, g_down, dx_down] = layer_at(-o.step, with_rx);
        const auto [y_uh, g_uh, dx_uh] = layer_at(o.step / 2, with_rx);
        const auto [y_dh, g_dh, dx_dh] = layer_at(-o.step / 2, with_rx);
        const auto [y, ry] = hvp_forward<B, double>(p, v, x, with_rx ? &rx : nullptr, m);
        if (!all_finite(y) || !all_finite(ry))
            r.fail("hvp_rule: forward gave a non-finite output (or read saved storage before writing it)" + how);
        if (worst_relative(y, y_ref) > 1e-10) r.fail("hvp_rule: forward's y differs from the layer's forward" + how);
        const double ery = finite_difference_error(central(y_up, y_down, y_uh, y_dh), ry, o.floor);
        r.error = worse(r.error, ery);
        if (!(ery <= o.tolerance)) r.fail("hvp_rule: Ry differs from finite differences by " + std::to_string(ery) + how);

        auto pull = [&](bool with_xbar) {
            std::vector<double> pt = p, vt = v, xt = x, rxt = rx, sv(Rule::saved * m + 1, nan), yy(Out * m), ryy(Out * m),
                scratch(Rule::scratch * m + 1, nan), g = g0, hv = hv0, yb = ybar, ryb = rybar, xbar(In * m, nan),
                rxbar(In * m, nan);
            const double* rxp = with_rx ? rxt.data() : nullptr;
            Rule::forward(static_cast<const double*>(pt.data()), static_cast<const double*>(vt.data()),
                          static_cast<const double*>(xt.data()), rxp, yy.data(), ryy.data(), sv.data(), m);
            const std::vector<double> sv_kept = sv;
            Rule::pullback(static_cast<const double*>(pt.data()), static_cast<const double*>(vt.data()), g.data(), hv.data(),
                           static_cast<const double*>(xt.data()), rxp, static_cast<const double*>(sv.data()), scratch.data(),
                           yb.data(), ryb.data(), with_xbar ? xbar.data() : nullptr, with_xbar ? rxbar.data() : nullptr, m);
            if (!same_values(sv, sv_kept) || xt != x || rxt != rx)
                r.fail("hvp_rule: the pullback changed x, Rx or the saved storage (containers read them after it)" + how);
            for (std::size_t i = 0; i < P; ++i) {
                g[i] -= g0[i];
                hv[i] -= hv0[i];
            }
            return std::tuple{g, hv, xbar, rxbar};
        };
        const auto [g, hv, xbar, rxbar] = pull(true);
        const auto [g_n, hv_n, xbar_n, rxbar_n] = pull(false);
        if (!all_finite(g) || !all_finite(hv) || !all_finite(xbar) || !all_finite(rxbar))
            r.fail("hvp_rule: the pullback gave a non-finite result (or read scratch before writing it)" + how);
        if (moved_fixed<B>(g, std::vector<double>(P, 0.0)) || moved_fixed<B>(hv, std::vector<double>(P, 0.0)))
            r.fail("hvp_rule: the pullback added to g or hv at a fixed parameter (layer.hpp, num_fixed_params)" + how);
        if (worst_relative(g, g_ref) > 1e-10 || worst_relative(xbar, dx_ref) > 1e-10)
            r.fail("hvp_rule: the pullback's g or xbar differs from the layer's pullback" + how);
        if (worst_relative(g_n, g) > 1e-12 || worst_relative(hv_n, hv) > 1e-12)
            r.fail("hvp_rule: a pullback with xbar = nullptr gave another g or hv" + how);
        const double eh = finite_difference_error(central(g_up, g_down, g_uh, g_dh), hv, o.floor);
        const double erx = finite_difference_error(central(dx_up, dx_down, dx_uh, dx_dh), rxbar, o.floor);
        r.error = worse(worse(r.error, eh), erx);
        if (!(eh <= o.tolerance)) r.fail("hvp_rule: hv differs from finite differences by " + std::to_string(eh) + how);
        if (!(erx <= o.tolerance))
            r.fail("hvp_rule: R xbar differs from finite differences by " + std::to_string(erx) + how);
        if (with_rx) {
            const auto [yf, ryf] = hvp_forward<B, float>(p, v, x, &rx, m);
            r.float_double_difference = std::max(worst_relative(yf, y), worst_relative(ryf, ry));
            if (!(r.float_double_difference <= o.float_tolerance))
                r.fail("hvp_rule: float and double differ by " + std::to_string(r.float_double_difference));
        }
    }

    // One sample (a chunk's last): sample 0 alone gives the chunk's y and Ry there, and the pullback of the
    // chunk whose cotangents are zero in every other sample.
    auto run = [&](std::size_t n, const std::vector<double>& xs, const std::vector<double>& rxs,
                   const std::vector<double>& yb, const std::vector<double>& ryb) {
        std::vector<double> y(Out * n), ry(Out * n), sv(Rule::saved * n + 1, nan), scr(Rule::scratch * n + 1, nan),
            g(P, 0.0), hv(P, 0.0), xbar(In * n, nan), rxbar(In * n, nan), yb_kept = yb, ryb_kept = ryb;
        Rule::forward(p.data(), v.data(), xs.data(), rxs.data(), y.data(), ry.data(), sv.data(), n);
        Rule::pullback(p.data(), v.data(), g.data(), hv.data(), xs.data(), rxs.data(), static_cast<const double*>(sv.data()),
                       scr.data(), yb_kept.data(), ryb_kept.data(), xbar.data(), rxbar.data(), n);
        return std::array{y, ry, g, hv, xbar, rxbar};
    };
    auto first_sample = [&](const std::vector<double>& a, std::size_t rows) {
        std::vector<double> s(rows);
        for (std::size_t i = 0; i < rows; ++i) s[i] = a[i * m];
        return s;
    };
    std::vector<double> yb_zero(Out * m, 0.0), ryb_zero(Out * m, 0.0);
    for (std::size_t f = 0; f < Out; ++f) {
        yb_zero[f * m] = ybar[f * m];
        ryb_zero[f * m] = rybar[f * m];
    }
    const auto chunk = run(m, x, rx, yb_zero, ryb_zero);
    const auto one = run(1, first_sample(x, In), first_sample(rx, In), first_sample(ybar, Out), first_sample(rybar, Out));
    const std::array<std::size_t, 6> rows{Out, Out, 0, 0, In, In};
    const char* names[6] = {"y", "Ry", "g", "hv", "xbar", "R xbar"};
    for (std::size_t k = 0; k < 6; ++k) {
        const auto ref = rows[k] ? first_sample(chunk[k], rows[k]) : chunk[k];
        if (worst_relative(one[k], ref) > 1e-12)
            r.fail(std::string("hvp_rule: one sample gave another ") + names[k] + " than the chunk of " + std::to_string(m));
    }
    return r;
}

}  // namespace detail

// Whether a check also holds the layer's derivative rules (jet_rule, hvp_rule) to finite differences.
// RuleChecks::off leaves them out at compile time: for a test of the forward and pullback alone over many
// shapes, which then neither compiles nor runs them (a declared rule that is inherited or lacks `layer` is
// still reported: that is the contract's).
enum class RuleChecks { on, off };

// The same for a layer already bound to its input shape (B = L::bound<Shape<...>>).
template <BoundLayer B, RuleChecks rules = RuleChecks::on>
LayerCheckResult check_bound_layer(const LayerCheckOptions& o = {}) {
    LayerCheckResult r;
    auto fail = [&](std::size_t n, const std::string& what) {
        r.failures.push_back("n=" + std::to_string(n) + ": " + what);
    };
    static_assert(detail::fixed_param_count<B>() <= B::num_params, "num_fixed_params exceeds num_params (layer.hpp)");
    const std::vector<std::size_t> free = detail::free_params<B>();
    for (const std::size_t n : o.chunk_sizes) {
        Rng rng(o.seed * 1000003 + n);
        const auto p = detail::fill_normal<double>(B::num_params, rng, o.param_scale);
        const auto x = detail::fill_normal<double>(B::in_size * n, rng, o.input_scale);
        const auto w = detail::fill_normal<double>(B::out_size * n, rng, 1.0);
        const auto g0 = detail::fill_normal<double>(B::num_params, rng, 1.0);

        // The forward and two pullbacks on it, then the same with a null dx.
        const double nan = std::numeric_limits<double>::quiet_NaN();
        std::vector<double> y(B::out_size * n), saved(B::saved_per_sample * n + 1, nan);
        detail::layer_forward<B>(p.data(), x.data(), y.data(), saved.data(), n, o.pass);
        if (!detail::all_finite(y)) fail(n, "forward gave a non-finite output (or read saved storage before writing it)");
        const std::vector<double> y_kept = y, saved_kept = saved;
        auto pull = [&](std::vector<double> g, bool with_dx) {
            std::vector<double> dy = w, dx(B::in_size * n, nan), scratch(B::scratch_per_sample * n + 1, nan);
            B::pullback(p.data(), g.data(), x.data(), y.data(), saved.data(), scratch.data(), dy.data(),
                        with_dx ? dx.data() : nullptr, n);
            return detail::LayerCheckRun{{}, std::move(dx), std::move(g)};
        };
        const auto first = pull(g0, true);
        if (y != y_kept || !detail::same_values(saved, saved_kept))
            fail(n, "pullback changed y or the saved storage (a repeated pullback would see other values)");
        const auto second = pull(std::vector<double>(B::num_params, 0.0), true);
        const auto no_dx = pull(std::vector<double>(B::num_params, 0.0), false);
        if (!detail::all_finite(first.dx) || !detail::all_finite(first.g))
            fail(n, "pullback gave a non-finite gradient (or read scratch before writing it)");
        double added = 0;
        for (std::size_t i = 0; i < B::num_params; ++i) {
            const double scale = std::max({std::abs(g0[i]), std::abs(second.g[i]), 1.0});
            added = std::max(added, std::abs((first.g[i] - g0[i]) - second.g[i]) / scale);
        }
        if (added > 1e-12) fail(n, "pullback does not add into g (g starting non-zero ended elsewhere)");
        if (detail::worst_relative(second.dx, first.dx) > 1e-12)
            fail(n, "a second pullback on the same forward gave another dx");
        if (no_dx.g != second.g) fail(n, "a pullback with dx = nullptr gave another parameter gradient");
        if (detail::moved_fixed<B>(first.g, g0))
            fail(n, "pullback added to the gradient of a fixed parameter (layer.hpp, num_fixed_params: it stays 0)");
        if constexpr (detail::has_pullback_assign<B, double>) {
            const std::string e = detail::check_pullback_assign<B, double>(p, x, w, n, o.pass);
            if (!e.empty()) fail(n, e);
        }
        if constexpr (detail::has_cotangent_rows<B, double>) {
            const std::string e = detail::check_cotangent_rows<B, double>(p, x, w, n, o.pass);
            if (!e.empty()) fail(n, e);
        }
        if constexpr (detail::has_pullback_from_rows<B, double>) {
            const std::string e = detail::check_pullback_from_rows<B, double>(p, x, w, g0, n, o.pass);
            if (!e.empty()) fail(n, e);
        }

        // Independent samples: the chunk with copies of its first sample appended, their cotangent zero, and
        // each sample's input moved on its own.
        bool independent = n == 1;
        if (n >= 2) {
            const std::string e = detail::check_independent_samples<B>(p, x, w, n, o.pass);
            if (!e.empty()) fail(n, e);
            independent = e.empty();
        }

        // Central finite differences of f(p, x) = sum(w .* forward(p, x)) = sum over the samples s of
        // f_s = sum(w_s .* y_s). With independent samples, d f / d x[j, s] = d f_s / d x[j, s]: feature j
        // moves in every sample at once and one pair of forward passes gives all n of them (n times fewer
        // passes; each difference also leaves out the other samples' rounding). Otherwise one entry at a time.
        std::vector<double> yy(B::out_size * n), ss(B::saved_per_sample * n + 1), up(n), down(n);
        auto sample_sums = [&](const std::vector<double>& pp, const std::vector<double>& xx, std::vector<double>& sums) {
            detail::layer_forward<B>(pp.data(), xx.data(), yy.data(), ss.data(), n, o.pass);
            std::fill(sums.begin(), sums.end(), 0.0);
            for (std::size_t i = 0; i < B::out_size; ++i)
                for (std::size_t s = 0; s < n; ++s) sums[s] += w[i * n + s] * yy[i * n + s];
        };
        auto f = [&](const std::vector<double>& pp, const std::vector<double>& xx) {
            sample_sums(pp, xx, up);
            double total = 0;
            for (double e : up) total += e;
            return total;
        };
        auto fd_error = [&](std::vector<double> v, const std::vector<double>& grad, bool params) {
            if (!params && independent) {
                std::vector<double> fd(v.size());
                for (std::size_t j = 0; j < B::in_size; ++j) {
                    for (std::size_t s = 0; s < n; ++s) v[j * n + s] = x[j * n + s] + o.step;
                    sample_sums(p, v, up);
                    for (std::size_t s = 0; s < n; ++s) v[j * n + s] = x[j * n + s] - o.step;
                    sample_sums(p, v, down);
                    for (std::size_t s = 0; s < n; ++s) {
                        v[j * n + s] = x[j * n + s];
                        fd[j * n + s] = (up[s] - down[s]) / (2 * o.step);
                    }
                }
                return detail::finite_difference_error(fd, grad, o.floor);
            }
            if (params) {  // the free entries only: a fixed one's gradient is 0 by the contract
                const auto fd = detail::central_differences(
                    detail::gather(v, free), [&](const std::vector<double>& q) { return f(detail::scatter(p, free, q), x); },
                    o.step, false);
                return detail::finite_difference_error(fd, detail::gather(grad, free), o.floor);
            }
            const auto fd = detail::central_differences(
                std::move(v), [&](const std::vector<double>& u) { return f(p, u); }, o.step, false);
            return detail::finite_difference_error(fd, grad, o.floor);
        };
        const double ep = fd_error(p, second.g, true), ex = fd_error(x, first.dx, false);
        r.parameter_gradient_error = std::max(r.parameter_gradient_error, ep);
        r.input_gradient_error = std::max(r.input_gradient_error, ex);
        if (!(ep <= o.tolerance)) fail(n, "parameter gradient differs from finite differences by " + std::to_string(ep));
        if (!(ex <= o.tolerance)) fail(n, "input gradient differs from finite differences by " + std::to_string(ex));

        // Float against double on the same float-exact inputs.
        const auto d = detail::layer_run<B, double>(p, x, w, g0, n, o.pass);
        const auto s = detail::layer_run<B, float>(p, x, w, g0, n, o.pass);
        if constexpr (detail::has_pullback_assign<B, float>) {
            const std::string e = detail::check_pullback_assign<B, float>(p, x, w, n, o.pass);
            if (!e.empty()) fail(n, "in float, " + e);
        }
        if constexpr (detail::has_cotangent_rows<B, float>) {
            const std::string e = detail::check_cotangent_rows<B, float>(p, x, w, n, o.pass);
            if (!e.empty()) fail(n, "in float, " + e);
        }
        if constexpr (detail::has_pullback_from_rows<B, float>) {
            const std::string e = detail::check_pullback_from_rows<B, float>(p, x, w, g0, n, o.pass);
            if (!e.empty()) fail(n, "in float, " + e);
        }
        const double fdiff = std::max({detail::worst_relative(s.y, d.y), detail::worst_relative(s.dx, d.dx),
                                       detail::worst_relative(s.g, d.g)});
        r.float_double_difference = std::max(r.float_double_difference, fdiff);
        if (!(fdiff <= o.float_tolerance)) fail(n, "float and double differ by " + std::to_string(fdiff));
    }

    using detail::RuleState;
    auto merge = [&](detail::RuleCheckOutcome outcome, bool& checked, double& error) {
        checked = true;
        error = outcome.error;
        r.float_double_difference = std::max(r.float_double_difference, outcome.float_double_difference);
        for (auto& f : outcome.failures) r.failures.push_back(std::move(f));
    };
    const std::string inherited = " names another layer: it is inherited from a base layer, whose derivatives it "
                                  "computes (declare the layer's own, layer.hpp)";
    const std::string without_layer = " has no member `layer` (declare `using layer = bound;`, layer.hpp)";
    constexpr RuleState jet = detail::rule_state<B, true>(), hvp = detail::rule_state<B, false>();
    r.jet_rule_unavailable = jet == RuleState::unavailable;
    r.hvp_rule_unavailable = hvp == RuleState::unavailable;
    if constexpr (jet == RuleState::inherited) r.failures.push_back("jet_rule" + inherited);
    else if constexpr (jet == RuleState::without_layer) r.failures.push_back("jet_rule" + without_layer);
    else if constexpr (jet == RuleState::own && rules == RuleChecks::on)
        merge(detail::check_jet_rule<B>(o), r.jet_rule_checked, r.jet_rule_error);
    if constexpr (hvp == RuleState::inherited) r.failures.push_back("hvp_rule" + inherited);
    else if constexpr (hvp == RuleState::without_layer) r.failures.push_back("hvp_rule" + without_layer);
    else if constexpr (hvp == RuleState::own && rules == RuleChecks::on)
        merge(detail::check_hvp_rule<B>(o), r.hvp_rule_checked, r.hvp_rule_error);
    return r;
}

template <class L, class InputSpec, RuleChecks rules = RuleChecks::on>
LayerCheckResult check_layer(const LayerCheckOptions& o = {}) {
    // A layer that breaks the contract or rejects the shape gets its one error there (layer.hpp), and a
    // stand-in here.
    return check_bound_layer<detail::checked_bound<L, typename InputSpec::shape>, rules>(o);
}

}  // namespace chainlet
