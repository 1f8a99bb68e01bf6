// Pullbacks for the caller: vector-Jacobian products and input Jacobians of a chain, for codes that
// put a network inside a larger differentiable computation (an ODE right-hand side, a physics model).
//
//   PullbackWorkspace<Net, T> ws(n_max);   // allocates once, for up to n_max samples
//   forward(ws, p, x, y);                  // y = net(x) for n rows; records what the pullback needs
//   pullback(ws, p, dy, dx, g);            // dx = (dy/dx)^T dy (overwritten), g += (dy/dp)^T dy
//   vjp(ws, p, x, dy, dx, g);              // both of the above
//   jacobian(ws, p, x, J);                 // J[i * in_size + j] = d y_i / d x_j for one sample
//
// Rows are sample-major as everywhere in chainlet (x: n rows of Net::in_size, y and dy: n rows of
// Net::out_size). Inside, activations are feature-major (the kernels' layout): x, dy and dx are
// transposed in and out as Workspace does. After construction no call allocates.
//
// A workspace belongs to one caller at a time; threads that share the parameters each bring their own
// (the layers are stateless, so concurrent calls on the same p with separate workspaces are safe and
// give the same bits as serial ones). The pullback uses the parameters given to the forward: pass the
// same p to both.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <ranges>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "chainlet/checks.hpp"
#include "chainlet/kernels/elementwise.hpp"
#include "chainlet/memory.hpp"
#include "chainlet/workspace.hpp"

namespace chainlet {

template <class Net, class T>
class PullbackWorkspace {
public:
    using net = Net;
    using value_type = T;

    // Room for up to max(max_samples, Net::out_size) samples: the Jacobian pulls back out_size rows
    // at once (see jacobian()).
    explicit PullbackWorkspace(std::size_t max_samples)
        : capacity_(std::max<std::size_t>({max_samples, Net::out_size, 1})), sink_(Net::num_params, T(0)) {
        b_.reserve(capacity_);
    }

    // Most samples one call takes.
    std::size_t capacity() const { return capacity_; }
    // Samples of the forward the next pullback would use (0: none recorded).
    std::size_t recorded() const { return recorded_; }

    // The unchecked core (sizes are the caller's); the free functions below check them. A null y
    // leaves the outputs in the workspace only.
    void forward(const T* p, const T* x, T* y, std::size_t n) {
        recorded_ = 0;  // nothing valid if a kernel throws half-way
        kernels::gather_transpose(x, Net::in_size, nullptr, n, b_.x);
        Net::forward(p, b_.x, b_.y, b_.saved, n);
        if (y) kernels::scatter_transpose(b_.y, Net::out_size, n, y);
        recorded_ = n;
    }

    void pullback(const T* p, const T* dy, T* dx, T* g) {
        const std::size_t n = recorded_;
        kernels::gather_transpose(dy, Net::out_size, nullptr, n, b_.dy);  // the layers clobber dy: copy it in
        Net::pullback(p, g, b_.x, b_.y, b_.saved, b_.scratch, b_.dy, b_.dx, n);
        kernels::scatter_transpose(b_.dx, Net::in_size, n, dx);
    }

    // Reverse mode, batched: the m = out_size rows of J are the input cotangents of the unit output
    // cotangents e_0 ... e_{m-1}, pulled back as m "samples" of one forward of x repeated m times. The
    // layers only have pullbacks (no tangent rules), and for the small output counts of ODE models
    // (out_size <= in_size) this is also the cheaper direction. Clears the recorded forward.
    void jacobian(const T* p, const T* x, T* J) {
        constexpr std::size_t m = Net::out_size;
        recorded_ = 0;
        for (std::size_t f = 0; f < Net::in_size; ++f) std::fill_n(b_.x + f * m, m, x[f]);
        Net::forward(p, b_.x, b_.y, b_.saved, m);
        std::fill_n(b_.dy, m * m, T(0));
        for (std::size_t i = 0; i < m; ++i) b_.dy[i * m + i] = T(1);  // feature i of sample i
        std::fill(sink_.begin(), sink_.end(), T(0));                  // the parameter cotangent is not wanted
        Net::pullback(p, sink_.data(), b_.x, b_.y, b_.saved, b_.scratch, b_.dy, b_.dx, m);
        // dx[j * m + i] = d y_i / d x_j  ->  J[i * in_size + j]
        kernels::scatter_transpose(b_.dx, Net::in_size, m, J);
    }

private:
    std::size_t capacity_;
    std::size_t recorded_ = 0;
    detail::ChainBuffers<Net, T> b_;  // input, output, saved, scratch and cotangent buffers (workspace.hpp)
    aligned_vector<T> sink_;          // the parameter cotangent jacobian() discards
};

namespace detail {

template <class T, class R>
void expect_type() {
    static_assert(std::is_same_v<value_t<R>, T>, "every buffer must have the workspace's element type");
}

// dy: n rows of out_size, dx: n rows of in_size, g: num_params.
template <class Net, class DY, class DX, class G>
void expect_cotangents(const char* where, std::size_t n, const DY& dy, const DX& dx, const G& g) {
    expect_size(where, "the output cotangent dy (rows of the forward times out_size)", n * Net::out_size,
                std::ranges::size(dy));
    expect_size(where, "the input cotangent dx", n * Net::in_size, std::ranges::size(dx));
    expect_size(where, "the parameter cotangent g", Net::num_params, std::ranges::size(g));
}

template <class Net, class T>
std::size_t pullback_rows(const PullbackWorkspace<Net, T>& ws, const char* where, std::size_t size) {
    const std::size_t n = count_rows(where, size, Net::in_size);
    if (n > ws.capacity())
        throw std::invalid_argument(std::string(where) + ": the input has " + std::to_string(n) +
                                    " samples, the workspace was sized for at most " + std::to_string(ws.capacity()));
    return n;
}

}  // namespace detail

// y = net(x) for the n rows of x (n <= ws.capacity()), recording the activations for pullback().
template <class Net, class T, std::ranges::contiguous_range P, std::ranges::contiguous_range X,
          std::ranges::contiguous_range Y>
void forward(PullbackWorkspace<Net, T>& ws, const P& p, const X& x, Y&& y) {
    detail::expect_type<T, P>(), detail::expect_type<T, X>(), detail::expect_type<T, Y>();
    constexpr const char* where = "forward";
    detail::expect_size(where, "the parameter buffer", Net::num_params, std::ranges::size(p));
    const std::size_t n = detail::pullback_rows(ws, where, std::ranges::size(x));
    detail::expect_size(where, "the output buffer", n * Net::out_size, std::ranges::size(y));
    ws.forward(std::ranges::data(p), std::ranges::data(x), std::ranges::data(y), n);
}

// For the n samples of the last forward(ws, ...): dx (n rows of in_size) = the input cotangent of the
// output cotangent dy (n rows of out_size), overwritten; g (num_params) += the parameter cotangent,
// summed over the samples. May be called again with another dy (the recorded forward is kept).
template <class Net, class T, std::ranges::contiguous_range P, std::ranges::contiguous_range DY,
          std::ranges::contiguous_range DX, std::ranges::contiguous_range G>
void pullback(PullbackWorkspace<Net, T>& ws, const P& p, const DY& dy, DX&& dx, G&& g) {
    detail::expect_type<T, P>(), detail::expect_type<T, DY>(), detail::expect_type<T, DX>(), detail::expect_type<T, G>();
    constexpr const char* where = "pullback";
    const std::size_t n = ws.recorded();
    if (n == 0)
        throw std::runtime_error("pullback: the workspace holds no forward pass; call forward(ws, p, x, y) first");
    detail::expect_size(where, "the parameter buffer", Net::num_params, std::ranges::size(p));
    detail::expect_cotangents<Net>(where, n, dy, dx, g);
    ws.pullback(std::ranges::data(p), std::ranges::data(dy), std::ranges::data(dx), std::ranges::data(g));
}

// forward (outputs discarded) then pullback: dx = J_x^T dy, g += J_p^T dy.
template <class Net, class T, std::ranges::contiguous_range P, std::ranges::contiguous_range X,
          std::ranges::contiguous_range DY, std::ranges::contiguous_range DX, std::ranges::contiguous_range G>
void vjp(PullbackWorkspace<Net, T>& ws, const P& p, const X& x, const DY& dy, DX&& dx, G&& g) {
    detail::expect_type<T, X>();
    constexpr const char* where = "vjp";
    detail::expect_size(where, "the parameter buffer", Net::num_params, std::ranges::size(p));
    const std::size_t n = detail::pullback_rows(ws, where, std::ranges::size(x));
    detail::expect_cotangents<Net>(where, n, dy, dx, g);  // before the forward: a bad call changes nothing
    ws.forward(std::ranges::data(p), std::ranges::data(x), nullptr, n);
    pullback(ws, p, dy, dx, g);
}

// J (out_size x in_size, row-major): J[i * in_size + j] = d y_i / d x_j at the single sample x.
// Clears the workspace's recorded forward.
template <class Net, class T, std::ranges::contiguous_range P, std::ranges::contiguous_range X,
          std::ranges::contiguous_range J>
void jacobian(PullbackWorkspace<Net, T>& ws, const P& p, const X& x, J&& jac) {
    detail::expect_type<T, P>(), detail::expect_type<T, X>(), detail::expect_type<T, J>();
    constexpr const char* where = "jacobian";
    detail::expect_size(where, "the parameter buffer", Net::num_params, std::ranges::size(p));
    detail::expect_size(where, "the input (one sample)", Net::in_size, std::ranges::size(x));
    detail::expect_size(where, "the Jacobian buffer (out_size x in_size)", Net::out_size * Net::in_size,
                        std::ranges::size(jac));
    ws.jacobian(std::ranges::data(p), std::ranges::data(x), std::ranges::data(jac));
}

}  // namespace chainlet
