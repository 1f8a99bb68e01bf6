// Eigen interop: pass Eigen matrices, vectors, maps and blocks wherever chainlet takes a buffer, and
// view chainlet's buffers as Eigen maps, without copying.
//
// Layout. chainlet's data are sample-major: sample s, feature f at [s * features + f]. That is exactly
// a column-major Eigen matrix with `features` rows and one column per sample:
//
//     Eigen::MatrixXd X(Net::in_size, n);      // column s = sample s
//     Eigen::MatrixXd Y(Net::out_size, n);
//     chainlet::predict<Net>(p, X, Y);         // p: Eigen::VectorXd, std::vector<double>, ...
//
// A row-major matrix with one sample per row (PyTorch's layout) has the same bytes: pass
// X.transpose(), a column-major view. Accepted: any Eigen object with its own contiguous storage
// (Matrix, Array, Map, Ref, blocks of whole columns, compile-time vectors). Rejected at compile time:
// expressions without storage (A * B, evaluate them first) and row-major matrices that are not
// vectors; rejected with std::invalid_argument at run time: strided views (X.topRows(k), a row of a
// column-major matrix) and matrices whose row count is not the per-sample size. A compile-time vector
// (VectorXd, RowVectorXi, ...) is taken as a flat buffer, e.g. parameters or integer labels.
//
// Eigen is not a dependency of the library: include this header and link Eigen3::Eigen yourself.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "chainlet/train.hpp"

#include <Eigen/Core>

namespace chainlet {

namespace detail {

// Deduces the CRTP base (a VectorBlock's is its Block's, so is_base_of<EigenBase<A>, A> would miss it).
template <class D>
void eigen_probe(const Eigen::EigenBase<D>&);
template <class A>
concept EigenObject = requires(const std::remove_cvref_t<A>& a) { detail::eigen_probe(a); };

}  // namespace detail

// An Eigen object whose coefficients chainlet can read as one contiguous run in column-major order
// (checked at compile time as far as the type tells; the strides are checked at run time).
template <class A>
concept EigenContiguous =
    detail::EigenObject<A> && ((std::remove_cvref_t<A>::Flags & Eigen::DirectAccessBit) != 0) &&
    (!bool(std::remove_cvref_t<A>::IsRowMajor) || bool(std::remove_cvref_t<A>::IsVectorAtCompileTime)) &&
    (std::remove_cvref_t<A>::InnerStrideAtCompileTime == 1 ||
     std::remove_cvref_t<A>::InnerStrideAtCompileTime == Eigen::Dynamic);

// The coefficients of x as a span over x's own storage (writable if x is), column-major.
// Throws std::invalid_argument if x is a strided view.
template <class A>
    requires detail::EigenObject<A>
auto as_span(A&& x) {
    using D = std::remove_cvref_t<A>;
    static_assert((D::Flags & Eigen::DirectAccessBit) != 0,
                  "chainlet::as_span: this Eigen expression has no storage of its own; evaluate it into a "
                  "Matrix (or use .eval()) first");
    static_assert(!bool(D::IsRowMajor) || bool(D::IsVectorAtCompileTime),
                  "chainlet::as_span: row-major matrices are not accepted; chainlet's layout is a column-major "
                  "matrix with one sample per column (for a row-major matrix with one sample per row, pass "
                  "its .transpose())");
    static_assert(D::InnerStrideAtCompileTime == 1 || D::InnerStrideAtCompileTime == Eigen::Dynamic,
                  "chainlet::as_span: the Eigen object has a non-unit inner stride");
    static_assert(!(std::is_rvalue_reference_v<A&&> && std::is_base_of_v<Eigen::PlainObjectBase<D>, D>),
                  "chainlet::as_span: a span of a temporary Eigen matrix would dangle");
    const Eigen::Index inner = x.innerSize(), outer = x.outerSize();
    const bool contiguous = x.size() == 0 || ((inner <= 1 || x.innerStride() == 1) &&
                                              (outer <= 1 || x.outerStride() == inner * x.innerStride()));
    if (!contiguous)
        throw std::invalid_argument(
            "chainlet::as_span: the Eigen object (" + std::to_string(x.rows()) + " x " + std::to_string(x.cols()) +
            ", inner stride " + std::to_string(x.innerStride()) + ", outer stride " +
            std::to_string(x.outerStride()) + ") is not contiguous; expected whole columns of a column-major matrix");
    using E = std::remove_pointer_t<decltype(x.data())>;
    return std::span<E>(x.data(), static_cast<std::size_t>(x.size()));
}

// chainlet buffers as Eigen maps over the same memory: a vector (parameters, gradients) ...
template <class T>
auto as_eigen(std::span<T> v) {
    using M = std::conditional_t<std::is_const_v<T>, const Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, 1>,
                                 Eigen::Matrix<T, Eigen::Dynamic, 1>>;
    return Eigen::Map<M>(v.data(), static_cast<Eigen::Index>(v.size()));
}

// ... or a rows x (size / rows) column-major matrix (inputs, outputs, targets: rows = features per sample).
template <class T>
auto as_eigen(std::span<T> v, std::size_t rows) {
    if (rows == 0 || v.size() % rows != 0)
        throw std::invalid_argument("chainlet::as_eigen: " + std::to_string(v.size()) +
                                    " values are not a whole number of columns of " + std::to_string(rows) + " rows");
    using M = std::conditional_t<std::is_const_v<T>,
                                 const Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, Eigen::Dynamic>,
                                 Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>>;
    return Eigen::Map<M>(v.data(), static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(v.size() / rows));
}

namespace detail {

template <class A>
concept EigenOrRange = EigenObject<A> || std::ranges::contiguous_range<std::remove_cvref_t<A>>;
template <class... A>
concept AnyEigen = (EigenObject<A> || ...);

// A buffer argument as the span API takes it: an Eigen object becomes a span of its storage, after
// checking that a matrix has `rows` rows (one sample per column; rows == 0: no check); anything else
// passes through.
template <class A>
decltype(auto) buffer(A&& a, std::size_t rows, const char* where, const char* what) {
    if constexpr (EigenObject<A>) {
        using D = std::remove_cvref_t<A>;
        if (rows != 0 && !bool(D::IsVectorAtCompileTime) && static_cast<std::size_t>(a.rows()) != rows)
            throw std::invalid_argument(std::string(where) + ": " + what + " has " + std::to_string(a.rows()) +
                                        " rows, expected " + std::to_string(rows) + " (one sample per column)");
        return as_span(a);
    } else {
        return std::forward<A>(a);
    }
}

// A's element type, for a range or an Eigen object; no `type` for anything else, so that the overloads
// below drop out of overload resolution for such arguments (a substitution failure) even where a
// compiler substitutes into the parameter types before it checks the requires-clause (clang 14 does).
template <class A>
struct element {};
template <std::ranges::range A>
    requires(!EigenObject<A>)
struct element<A> {
    using type = value_t<A>;
};
template <EigenObject A>
struct element<A> {
    using type = typename std::remove_cvref_t<A>::Scalar;
};
template <class A>
using element_t = typename element<A>::type;

template <class A>
inline constexpr bool writable = !std::is_const_v<std::remove_pointer_t<decltype(std::ranges::data(
    std::declval<decltype(buffer(std::declval<A>(), 0, "", ""))>()))>>;

}  // namespace detail

// predict, value_and_gradient and fit with any mix of Eigen objects and contiguous ranges (at least one
// Eigen object; the overloads in train.hpp take the rest). Same semantics, no copies: x is read in place
// (in_size x n), out is written in place (out_size x n).
template <class Net, class P, class X, class O>
    requires detail::AnyEigen<P, X, O> && detail::EigenOrRange<P> && detail::EigenOrRange<O> &&
             (detail::EigenOrRange<X> || std::same_as<std::remove_cvref_t<X>, ByteData>)
void predict(Workspace<Net, detail::element_t<O>>& ws, P&& p, X&& x, O&& out, int threads = 1) {
    static_assert(detail::writable<O>, "predict: the output buffer must be writable");
    predict<Net>(ws, detail::buffer(p, 0, "predict", "the parameter buffer"),
                 detail::buffer(x, Net::in_size, "predict", "the input matrix"),
                 detail::buffer(out, Net::out_size, "predict", "the output matrix"), threads);
}

template <class Net, class P, class X, class O>
    requires detail::AnyEigen<P, X, O> && detail::EigenOrRange<P> && detail::EigenOrRange<O> &&
             (detail::EigenOrRange<X> || std::same_as<std::remove_cvref_t<X>, ByteData>)
void predict(P&& p, X&& x, O&& out, int threads = 1) {
    predict<Net>(thread_workspace<Net, detail::element_t<O>>(), p, x, out, threads);
}

template <class Net, class P, class G, class X, class Y, class L>
    requires detail::AnyEigen<P, G, X, Y> && detail::EigenOrRange<P> && detail::EigenOrRange<G> &&
             detail::EigenOrRange<Y> && (detail::EigenOrRange<X> || std::same_as<std::remove_cvref_t<X>, ByteData>)
detail::element_t<G> value_and_gradient(Workspace<Net, detail::element_t<G>>& ws, P&& p, G&& g, X&& x, Y&& y,
                                        const L& loss, int threads = 1) {
    static_assert(detail::writable<G>, "value_and_gradient: the gradient buffer must be writable");
    constexpr const char* where = "value_and_gradient";
    return value_and_gradient<Net>(ws, detail::buffer(p, 0, where, "the parameter buffer"),
                                   detail::buffer(g, 0, where, "the gradient buffer"),
                                   detail::buffer(x, Net::in_size, where, "the input matrix"),
                                   detail::buffer(y, L::targets_per_sample(Net::out_size), where, "the target matrix"),
                                   loss, threads);
}

template <class Net, class P, class G, class X, class Y, class L>
    requires detail::AnyEigen<P, G, X, Y> && detail::EigenOrRange<P> && detail::EigenOrRange<G> &&
             detail::EigenOrRange<Y> && (detail::EigenOrRange<X> || std::same_as<std::remove_cvref_t<X>, ByteData>)
detail::element_t<G> value_and_gradient(P&& p, G&& g, X&& x, Y&& y, const L& loss, int threads = 1) {
    return value_and_gradient<Net>(thread_workspace<Net, detail::element_t<G>>(), p, g, x, y, loss, threads);
}

// The split argument is train.hpp's (WholeBatch by default, AllreduceBatch for MPI), passed through.
template <class Net, class P, class L, class X, class Y, class Opt, class Split = WholeBatch>
    requires detail::AnyEigen<P, X, Y> && detail::EigenOrRange<P> && detail::EigenOrRange<Y> &&
             (detail::EigenOrRange<X> || std::same_as<std::remove_cvref_t<X>, ByteData>)
FitResult fit(P&& p, const L& loss, X&& x, Y&& y, Opt& opt, const FitOptions& o = {}, Split&& split = {}) {
    static_assert(detail::writable<P>, "fit: the parameter buffer must be writable");
    return fit<Net>(detail::buffer(p, 0, "fit", "the parameter buffer"), loss,
                    detail::buffer(x, Net::in_size, "fit", "the input matrix"),
                    detail::buffer(y, L::targets_per_sample(Net::out_size), "fit", "the target matrix"), opt, o,
                    std::forward<Split>(split));
}

}  // namespace chainlet
