// What the full-batch minimisers (LBFGS in lbfgs.hpp, NewtonCG in newton_cg.hpp) share: their results,
// their per-iteration report, and the strong-Wolfe line search, which is LBFGSpp's (Debian:
// liblbfgspp-dev, header-only on Eigen): Nocedal & Wright's Algorithm 3.5 with the zoom of 3.6, on our
// buffers, allocation-free. Needs Eigen and LBFGSpp (the CMake target chainlet::lbfgs).
#pragma once

// g++ 12 warns -Wmaybe-uninitialized inside its own AVX-512 intrinsics where Eigen's reductions use them
// at -O3 (_mm512_extractf64x4_pd's undefined upper half: GCC bug 105593, fixed in GCC 13). The state at
// Eigen's headers is what counts for their instances, so the warning is off for these includes only.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#include <LBFGSpp/Param.h>  // before the line search, which uses it
#include <LBFGSpp/LineSearchNocedalWright.h>
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic pop
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

namespace chainlet {

enum class MinimizeStop { gradient, loss, iterations, line_search, callback };

inline const char* to_string(MinimizeStop s) {
    switch (s) {
        case MinimizeStop::gradient: return "gradient tolerance";
        case MinimizeStop::loss: return "loss tolerance";
        case MinimizeStop::iterations: return "iteration limit";
        case MinimizeStop::line_search: return "line search found no decrease";
        case MinimizeStop::callback: return "stopped by the callback";
    }
    return "?";
}

struct MinimizeIteration {
    std::size_t iteration;    // 1-based, within this minimize() call
    std::size_t evaluations;  // of the loss and gradient so far, within this call
    double loss;
    double gradient_norm;
    double step;              // the line search's step along the direction
};

struct MinimizeResult {
    std::size_t iterations = 0, evaluations = 0;
    std::size_t hessian_products = 0;  // NewtonCG's H v products
    double loss = 0, gradient_norm = 0, seconds = 0;
    MinimizeStop stop = MinimizeStop::iterations;
    // Whether a further minimize() call could go on (fit calls again then, up to its epochs).
    bool stopped_at_iteration_limit() const { return stop == MinimizeStop::iterations; }
};

// The default on_iteration of minimize(): never stops.
struct NoIterationCallback {
    bool operator()(const MinimizeIteration&) const { return false; }
};

namespace detail {

template <class T>
using EigenVector = Eigen::Matrix<T, Eigen::Dynamic, 1>;

// The loss and gradient at x for the line search: f(std::span<const T>, std::span<T>) -> loss, counted;
// a non-finite loss or gradient throws NonFinite, which the search below takes as no decrease.
struct NonFinite {};
template <class T, class F>
struct CountedLoss {
    F& f;
    std::size_t& evaluations;
    T operator()(const EigenVector<T>& at, EigenVector<T>& grad) const {
        ++evaluations;
        const auto n = static_cast<std::size_t>(at.size());
        const T loss = static_cast<T>(f(std::span<const T>(at.data(), n), std::span<T>(grad.data(), n)));
        if (!std::isfinite(loss) || !grad.allFinite()) throw NonFinite{};
        return loss;
    }
};

// A strong-Wolfe line search from xp (loss fp, gradient gp) along d, starting at `step`: on success x, fx,
// g hold the new point and it returns true; when it finds no decrease (a non-finite loss, LBFGSpp's
// zoom collapsing, d not a descent direction, or the evaluations running out above fp) x, fx, g are
// put back to xp, fp, gp and it returns false.
template <class T, class Loss>
bool wolfe_search(Loss& loss, const LBFGSpp::LBFGSParam<T>& param, T& fx, EigenVector<T>& x, EigenVector<T>& g, T& step,
                  const EigenVector<T>& d, const EigenVector<T>& xp, const EigenVector<T>& gp, T fp) {
    bool moved = false;
    try {
        LBFGSpp::LineSearchNocedalWright<T>::LineSearch(loss, fx, x, g, step, d, xp, param);
        moved = fx < fp;
    } catch (const NonFinite&) {
    } catch (const std::runtime_error&) {  // LBFGSpp: the zoom's interval collapsed
    } catch (const std::logic_error&) {    // LBFGSpp: d is not a descent direction
    }
    if (!moved) {
        x = xp;
        g = gp;
        fx = fp;
    }
    return moved;
}

// The first evaluation of a minimisation: a non-finite loss or gradient there is an error.
template <class T, class Loss>
T first_evaluation(Loss& loss, const EigenVector<T>& x, EigenVector<T>& g, const char* who) {
    try {
        return loss(x, g);
    } catch (const NonFinite&) {
        throw std::runtime_error(std::string(who) + ": the loss or its gradient is not finite at the starting point");
    }
}

// The minimisers' gradient test: |g| <= tolerance * max(1, |x|).
template <class T>
bool gradient_converged(double gnorm, const EigenVector<T>& x, double tolerance) {
    return gnorm <= tolerance * std::max(1.0, static_cast<double>(x.norm()));
}

// The end of a minimize(): the last point into the caller's x, and the result's loss, norm and time.
template <class T>
MinimizeResult finish(MinimizeResult r, const EigenVector<T>& x_end, std::span<T> x, T fx, double gnorm,
                      std::chrono::steady_clock::time_point t0) {
    std::copy(x_end.data(), x_end.data() + x.size(), x.data());
    r.loss = static_cast<double>(fx);
    r.gradient_norm = gnorm;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

template <class T>
LBFGSpp::LBFGSParam<T> wolfe_param(std::size_t max_line_search, double decrease, double curvature) {
    LBFGSpp::LBFGSParam<T> param;
    param.linesearch = LBFGSpp::LBFGS_LINESEARCH_BACKTRACKING_STRONG_WOLFE;
    // LBFGSpp 0.1 returns after the evaluation at which its count reaches max_linesearch: one more
    param.max_linesearch = static_cast<int>(max_line_search) - 1;
    param.ftol = static_cast<T>(decrease);
    param.wolfe = static_cast<T>(curvature);
    return param;
}

}  // namespace detail
}  // namespace chainlet
