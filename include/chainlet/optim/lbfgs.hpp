// L-BFGS (Nocedal & Wright, Numerical Optimization, 2nd ed., Algorithm 7.5) for full-batch losses: fit's
// full batch (fit with an LBFGS optimiser), physics-informed residual losses, or any callable
// f(x, g) -> loss that writes the gradient g at x.
//
// The strong-Wolfe line search is LBFGSpp's (line_search.hpp). The search direction is the two-loop
// recursion (Algorithm 7.4) over a history this class owns, rather than LBFGSpp's solver,
// whose history is private: the history is what a checkpoint saves, so that a resumed minimisation
// continues bit for bit (state_bytes, load_state). The pair (s, y) of an iteration enters the history
// only when s'y > 1e-10 y'y, which keeps the approximate inverse Hessian positive definite.
//
// Needs Eigen and LBFGSpp (not part of chainlet.hpp): #include "chainlet/optim/lbfgs.hpp".
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "chainlet/memory.hpp"
#include "chainlet/message.hpp"
#include "chainlet/optim/line_search.hpp"

namespace chainlet {

struct LBFGSOptions {
    std::size_t history = 10;           // (s, y) pairs kept; PINN losses, badly conditioned, like 50 or more
    std::size_t max_iterations = 100;   // per minimize() call; 0 = no limit
    // Stop when |g| <= gradient_tolerance * max(1, |x|) (L2 norms).
    double gradient_tolerance = 1e-10;
    // Stop when the loss fell by no more than loss_tolerance * max(1, |loss|) over the last `past`
    // iterations; 0 = off.
    double loss_tolerance = 0;
    std::size_t past = 1;
    std::size_t max_line_search = 25;   // evaluations per line search
    double wolfe_decrease = 1e-4;       // c1: f(x + a d) <= f(x) + c1 a g'd
    double wolfe_curvature = 0.9;       // c2: |g(x + a d)'d| <= c2 |g'd|
};

template <class T>
class LBFGS {
    using Vector = detail::EigenVector<T>;

public:
    static constexpr bool minimizes_full_batch = true;  // fit runs it over the full batch (train.hpp)

    explicit LBFGS(LBFGSOptions o = {}) : o_(o) {
        if (o.history == 0 || o.past == 0 || o.max_line_search == 0 || !(o.gradient_tolerance >= 0) ||
            !(o.loss_tolerance >= 0) || !(o.wolfe_decrease > 0 && o.wolfe_decrease < o.wolfe_curvature && o.wolfe_curvature < 1))
            throw std::invalid_argument(
                "LBFGS: need history, past and max_line_search >= 1, tolerances >= 0, 0 < wolfe_decrease < "
                "wolfe_curvature < 1; got history " + std::to_string(o.history) + ", past " + std::to_string(o.past) +
                ", max_line_search " + std::to_string(o.max_line_search) + ", wolfe " + detail::number(o.wolfe_decrease) +
                " / " + detail::number(o.wolfe_curvature));
    }

    const LBFGSOptions& options() const { return o_; }
    void set_max_iterations(std::size_t k) { o_.max_iterations = k; }

    // Empties the history and sizes the buffers for n parameters (minimize() does it on first use).
    void init(std::size_t n) {
        n_ = n;
        const std::size_t m = o_.history;
        s_.assign(n * m, T(0));
        y_.assign(n * m, T(0));
        rho_.assign(m, T(0));
        alpha_.assign(m, T(0));
        past_loss_.assign(o_.past, 0.0);
        count_ = newest_ = 0;
        iterations_ = 0;
        x_.setZero(static_cast<Eigen::Index>(n));
        g_.setZero(static_cast<Eigen::Index>(n));
        xp_.setZero(static_cast<Eigen::Index>(n));
        gp_.setZero(static_cast<Eigen::Index>(n));
        d_.setZero(static_cast<Eigen::Index>(n));
    }
    std::size_t pairs() const { return count_; }       // (s, y) pairs in the history
    std::size_t iterations() const { return iterations_; }  // over every minimize() since init

    // Minimises f from x, in place: f(std::span<const T> x, std::span<T> g) returns the loss at x and
    // writes its gradient into g. Continues from the history of earlier calls (init() or a fresh LBFGS
    // starts anew). on_iteration(const MinimizeIteration&), if given, is called after every iteration and
    // may return true to stop. A non-finite loss or gradient at x throws std::runtime_error.
    // A non-finite loss or gradient in a line search is treated as no decrease there: the history is
    // dropped and the search retried from x along -g; a second failure ends with MinimizeStop::line_search.
    // Allocates only in init(), on the first call or when the size changes.
    template <class F, class OnIteration = NoIterationCallback>
    MinimizeResult minimize(std::span<T> x, F&& f, OnIteration&& on_iteration = {}) {
        const auto t0 = std::chrono::steady_clock::now();
        if (x.empty()) throw std::invalid_argument("LBFGS::minimize: no parameters");
        if (x.size() != n_) {
            if (n_ != 0 && count_ > 0)
                throw std::invalid_argument("LBFGS::minimize: the history is for " + std::to_string(n_) +
                                            " parameters, given " + std::to_string(x.size()));
            init(x.size());
        }
        const std::size_t n = n_;
        MinimizeResult r;
        std::copy(x.begin(), x.end(), x_.data());
        detail::CountedLoss<T, std::remove_reference_t<F>> eval{f, r.evaluations};
        T fx = detail::first_evaluation<T>(eval, x_, g_, "LBFGS::minimize");
        double gnorm = static_cast<double>(g_.norm());
        const auto param = detail::wolfe_param<T>(o_.max_line_search, o_.wolfe_decrease, o_.wolfe_curvature);
        auto converged = [&] { return detail::gradient_converged(gnorm, x_, o_.gradient_tolerance); };
        r.stop = converged() ? MinimizeStop::gradient : MinimizeStop::iterations;
        for (std::size_t k = 1; r.stop == MinimizeStop::iterations && (o_.max_iterations == 0 || k <= o_.max_iterations); ++k) {
            xp_ = x_;
            gp_ = g_;
            const T fp = fx;
            direction();
            T step = count_ == 0 ? T(1) / static_cast<T>(d_.norm()) : T(1);
            bool moved = detail::wolfe_search(eval, param, fx, x_, g_, step, d_, xp_, gp_, fp);
            if (!moved && count_ > 0) {  // retry along -g without the history
                count_ = 0;
                direction();
                step = T(1) / static_cast<T>(d_.norm());
                moved = detail::wolfe_search(eval, param, fx, x_, g_, step, d_, xp_, gp_, fp);
            }
            if (!moved) {
                r.stop = MinimizeStop::line_search;
                break;
            }
            ++iterations_;
            r.iterations = k;
            gnorm = static_cast<double>(g_.norm());
            add_pair();
            const double loss = static_cast<double>(fx);
            if (converged()) r.stop = MinimizeStop::gradient;
            if (o_.loss_tolerance > 0) {
                double& then = past_loss_[iterations_ % o_.past];
                if (iterations_ > o_.past &&
                    then - loss <= o_.loss_tolerance * std::max(1.0, std::abs(loss)) && r.stop == MinimizeStop::iterations)
                    r.stop = MinimizeStop::loss;
                then = loss;
            }
            std::copy(x_.data(), x_.data() + n, x.data());
            if (on_iteration(MinimizeIteration{k, r.evaluations, loss, gnorm, static_cast<double>(step)}) &&
                r.stop == MinimizeStop::iterations)
                r.stop = MinimizeStop::callback;
        }
        return detail::finish(r, x_, x, fx, gnorm, t0);
    }

    // For checkpoints (io/checkpoint.hpp): the state's name, the history as bytes and back: u64 n, u64
    // history, u64 count, u64 newest, u64 iterations, u64 past, then s, y (n x history each), rho
    // (history) and the loss window (past doubles); all zero before the first minimize().
    std::string state_name() const { return std::is_same_v<T, float> ? "L-BFGS (float)" : "L-BFGS (double)"; }
    std::vector<std::byte> state_bytes() const {
        std::vector<std::byte> b;
        const std::uint64_t head[] = {n_, o_.history, count_, newest_, iterations_, o_.past};
        append(b, head, std::size(head));
        append(b, s_.data(), s_.size());
        append(b, y_.data(), y_.size());
        const std::vector<T> no_rho(rho_.empty() ? o_.history : 0, T(0));
        const std::vector<double> no_past(past_loss_.empty() ? o_.past : 0, 0.0);
        append(b, rho_.empty() ? no_rho.data() : rho_.data(), o_.history);
        append(b, past_loss_.empty() ? no_past.data() : past_loss_.data(), o_.past);
        return b;
    }
    // A checkpoint passes the chain's parameter count: a history for another size is refused then.
    void load_state(std::span<const std::byte> b, std::size_t num_params) {
        std::uint64_t n = 0;
        if (b.size() >= 8) std::memcpy(&n, b.data(), 8);
        if (n != 0 && n != num_params)
            throw std::invalid_argument("LBFGS::load_state: the history is for " + std::to_string(n) +
                                        " parameters, the chain has " + std::to_string(num_params));
        load_state(b);
    }
    void load_state(std::span<const std::byte> b) {
        std::uint64_t head[6];
        std::size_t pos = 0;
        read(b, pos, head, 6);
        const auto [n, m, count, newest, iterations, past] = head;
        if (m != o_.history || past != o_.past || count > m || (m > 0 && newest >= m) || n > (std::uint64_t(1) << 40))
            throw std::invalid_argument("LBFGS::load_state: the state is for history " + std::to_string(m) + " and past " +
                                        std::to_string(past) + " (this optimiser: " + std::to_string(o_.history) + ", " +
                                        std::to_string(o_.past) + "), or is corrupt");
        const std::size_t expected = 6 * 8 + (2 * n * m + m) * sizeof(T) + past * sizeof(double);
        if (b.size() != expected)
            throw std::invalid_argument("LBFGS::load_state: " + std::to_string(b.size()) + " bytes, expected " +
                                        std::to_string(expected) + " for " + std::to_string(n) + " parameters");
        init(n);
        read(b, pos, s_.data(), s_.size());
        read(b, pos, y_.data(), y_.size());
        read(b, pos, rho_.data(), rho_.size());
        read(b, pos, past_loss_.data(), past_loss_.size());
        count_ = count;
        newest_ = newest;
        iterations_ = iterations;
    }

private:
    Eigen::Map<Vector> col(aligned_vector<T>& v, std::size_t i) {
        return Eigen::Map<Vector>(v.data() + i * n_, static_cast<Eigen::Index>(n_));
    }

    // d = -H g by the two-loop recursion, H0 = (s'y / y'y) I from the newest pair (I without one).
    void direction() {
        d_ = g_;
        const std::size_t m = o_.history;
        for (std::size_t j = 0; j < count_; ++j) {  // newest to oldest
            const std::size_t i = (newest_ + m - j) % m;
            alpha_[i] = rho_[i] * col(s_, i).dot(d_);
            d_ -= alpha_[i] * col(y_, i);
        }
        if (count_ > 0) {
            const auto yn = col(y_, newest_);
            d_ *= T(1) / (rho_[newest_] * yn.squaredNorm());
        }
        for (std::size_t j = count_; j-- > 0;) {  // oldest to newest
            const std::size_t i = (newest_ + m - j) % m;
            const T beta = rho_[i] * col(y_, i).dot(d_);
            d_ += (alpha_[i] - beta) * col(s_, i);
        }
        d_ = -d_;
    }
    // s = x - xp, y = g - gp into the history when s'y > 1e-10 y'y.
    void add_pair() {
        const T sy = (x_ - xp_).dot(g_ - gp_), yy = (g_ - gp_).squaredNorm();
        if (!(sy > T(1e-10) * yy) || !(yy > 0)) return;
        const std::size_t m = o_.history;
        const std::size_t i = count_ == 0 ? 0 : (newest_ + 1) % m;
        col(s_, i) = x_ - xp_;
        col(y_, i) = g_ - gp_;
        rho_[i] = T(1) / sy;
        newest_ = i;
        count_ = std::min(count_ + 1, m);
    }

    template <class V>
    static void append(std::vector<std::byte>& b, const V* v, std::size_t k) {
        const std::size_t at = b.size();
        b.resize(at + k * sizeof(V));
        if (k) std::memcpy(b.data() + at, v, k * sizeof(V));
    }
    template <class V>
    static void read(std::span<const std::byte> b, std::size_t& pos, V* v, std::size_t k) {
        if (b.size() - pos < k * sizeof(V)) throw std::invalid_argument("LBFGS::load_state: the state is truncated");
        if (k) std::memcpy(v, b.data() + pos, k * sizeof(V));
        pos += k * sizeof(V);
    }

    LBFGSOptions o_;
    std::size_t n_ = 0, count_ = 0, newest_ = 0, iterations_ = 0;
    aligned_vector<T> s_, y_, rho_, alpha_;
    std::vector<double> past_loss_;
    Vector x_, g_, xp_, gp_, d_;
};

}  // namespace chainlet
