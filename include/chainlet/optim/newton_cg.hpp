// Newton-CG, the truncated Newton method (Nocedal & Wright, Numerical Optimization, 2nd ed., Algorithm
// 7.1), for full-batch losses whose exact Hessian-vector product is available (HessianVectorWorkspace,
// chainlet/derivatives/hvp.hpp). Each iteration solves H d = -g approximately by conjugate gradients
// from d = 0, to the forcing tolerance |H d + g| <= min(forcing, sqrt|g|) |g|, stopping at the first
// direction of non-positive curvature (then d is the CG iterate so far, or -g on the first CG step), and
// then searches along d with the strong-Wolfe line search of line_search.hpp, starting at step 1.
// CG recursion, r = H z + g, q the conjugate direction:
//   a = r'r / q'Hq,  z += a q,  r' = r + a Hq,  b = r''r' / r'r,  q = -r' + b q.
// Needs Eigen and LBFGSpp (the CMake target chainlet::lbfgs): #include "chainlet/optim/newton_cg.hpp".
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "chainlet/message.hpp"
#include "chainlet/optim/line_search.hpp"

namespace chainlet {

struct NewtonCGOptions {
    std::size_t max_iterations = 100;   // Newton iterations per minimize() call; 0 = no limit
    std::size_t max_cg = 50;            // CG iterations (H v products) per Newton iteration
    // The CG residual's bound relative to |g|, at most. Nocedal & Wright's 0.5 ends CG after its first
    // step wherever one step reduces the residual that much, as in a curved valley (Rosenbrock's), and
    // the method then zigzags like steepest descent; 0.01 keeps Newton's steps.
    double forcing = 0.01;
    double gradient_tolerance = 1e-10;  // stop at |g| <= tol * max(1, |x|)
    std::size_t max_line_search = 25;
    double wolfe_decrease = 1e-4, wolfe_curvature = 0.9;
};

template <class T>
class NewtonCG {
    using Vector = detail::EigenVector<T>;

public:
    explicit NewtonCG(NewtonCGOptions o = {}) : o_(o) {
        if (o.max_cg == 0 || o.max_line_search == 0 || !(o.gradient_tolerance >= 0) || !(o.forcing > 0 && o.forcing < 1) ||
            !(o.wolfe_decrease > 0 && o.wolfe_decrease < o.wolfe_curvature && o.wolfe_curvature < 1))
            throw std::invalid_argument("NewtonCG: need max_cg and max_line_search >= 1, gradient_tolerance >= 0, 0 < forcing < 1, 0 < "
                                        "wolfe_decrease < wolfe_curvature < 1; got max_cg " + std::to_string(o.max_cg) +
                                        ", wolfe " + detail::number(o.wolfe_decrease) + " / " +
                                        detail::number(o.wolfe_curvature));
    }
    const NewtonCGOptions& options() const { return o_; }

    // Sizes the buffers for n parameters (minimize() does it when the size changes).
    void init(std::size_t n) {
        for (Vector* v : {&x_, &g_, &xp_, &gp_, &d_, &r_, &q_, &hq_}) v->setZero(static_cast<Eigen::Index>(n));
    }

    // Minimises f from x, in place. f(std::span<const T> x, std::span<T> g) returns the loss and writes its
    // gradient; hv(std::span<const T> x, std::span<const T> v, std::span<T> out) writes H(x) v. on_iteration
    // and a non-finite start as LBFGS's. Allocates only when the size changes. fit does not run it: it
    // needs the H v product, which fit's losses do not provide.
    template <class F, class HV, class OnIteration = NoIterationCallback>
    MinimizeResult minimize(std::span<T> x, F&& f, HV&& hv, OnIteration&& on_iteration = {}) {
        const auto t0 = std::chrono::steady_clock::now();
        if (x.empty()) throw std::invalid_argument("NewtonCG::minimize: no parameters");
        const std::size_t n = x.size();
        if (static_cast<std::size_t>(x_.size()) != n) init(n);
        MinimizeResult r;
        std::copy(x.begin(), x.end(), x_.data());
        detail::CountedLoss<T, std::remove_reference_t<F>> eval{f, r.evaluations};
        T fx = detail::first_evaluation<T>(eval, x_, g_, "NewtonCG::minimize");
        double gnorm = static_cast<double>(g_.norm());
        const auto param = detail::wolfe_param<T>(o_.max_line_search, o_.wolfe_decrease, o_.wolfe_curvature);
        auto converged = [&] { return detail::gradient_converged(gnorm, x_, o_.gradient_tolerance); };
        auto product = [&](const Vector& v, Vector& out) {
            ++r.hessian_products;
            hv(std::span<const T>(x_.data(), n), std::span<const T>(v.data(), n), std::span<T>(out.data(), n));
        };
        r.stop = converged() ? MinimizeStop::gradient : MinimizeStop::iterations;
        for (std::size_t k = 1; r.stop == MinimizeStop::iterations && (o_.max_iterations == 0 || k <= o_.max_iterations); ++k) {
            // CG on H d = -g from d = 0 (d_ holds z, r_ the residual H z + g, q_ the direction)
            const T tolerance = static_cast<T>(std::min(o_.forcing, std::sqrt(gnorm)) * gnorm);
            d_.setZero();
            r_ = g_;
            q_ = -g_;
            T rr = r_.squaredNorm();
            for (std::size_t j = 0; j < o_.max_cg; ++j) {
                product(q_, hq_);
                const T curvature = q_.dot(hq_);
                if (!(curvature > 0)) {
                    if (j == 0) d_ = -g_;
                    break;
                }
                const T a = rr / curvature;
                d_ += a * q_;
                r_ += a * hq_;
                const T rr_next = r_.squaredNorm();
                if (std::sqrt(rr_next) <= tolerance) break;
                q_ = -r_ + (rr_next / rr) * q_;
                rr = rr_next;
            }
            xp_ = x_;
            gp_ = g_;
            const T fp = fx;
            T step = 1;
            bool moved = detail::wolfe_search(eval, param, fx, x_, g_, step, d_, xp_, gp_, fp);
            if (!moved) {  // along -g instead
                d_ = -g_;
                step = T(1) / static_cast<T>(d_.norm());
                moved = detail::wolfe_search(eval, param, fx, x_, g_, step, d_, xp_, gp_, fp);
            }
            if (!moved) {
                r.stop = MinimizeStop::line_search;
                break;
            }
            r.iterations = k;
            gnorm = static_cast<double>(g_.norm());
            if (converged()) r.stop = MinimizeStop::gradient;
            std::copy(x_.data(), x_.data() + n, x.data());
            if (on_iteration(MinimizeIteration{k, r.evaluations, static_cast<double>(fx), gnorm, static_cast<double>(step)}) &&
                r.stop == MinimizeStop::iterations)
                r.stop = MinimizeStop::callback;
        }
        return detail::finish(r, x_, x, fx, gnorm, t0);
    }

private:
    NewtonCGOptions o_;
    Vector x_, g_, xp_, gp_, d_, r_, q_, hq_;
};

}  // namespace chainlet
