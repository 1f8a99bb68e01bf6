// Helpers shared by the tests (include after catch.hpp): reproducible random data and finite-difference
// gradient checks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "chainlet/layer_check.hpp"
#include "chainlet/random.hpp"

// The element types of a test program's TEMPLATE_TEST_CASEs over float and double: both, unless
// tests/CMakeLists.txt's chainlet_test_per_type builds the file as one program per type.
#ifndef CHAINLET_TEST_TYPES
#define CHAINLET_TEST_TYPES float, double
#endif

namespace test {

// The layer checker's options for the layers checked on odd chunk sizes: one sample, a partial vector,
// vectors and a tail, several vectors and a tail.
inline chainlet::LayerCheckOptions odd_chunk_options() {
    chainlet::LayerCheckOptions o;
    o.chunk_sizes = {1, 3, 17, 35};
    return o;
}

// The layer checker's options for these chunk sizes and tolerance.
inline chainlet::LayerCheckOptions chunk_options(std::vector<std::size_t> chunk_sizes, double tolerance) {
    chainlet::LayerCheckOptions o;
    o.chunk_sizes = std::move(chunk_sizes);
    o.tolerance = tolerance;
    return o;
}

template <class T = double>
std::vector<T> random_vector(std::size_t n, std::uint64_t seed, double scale = 1.0) {
    chainlet::Rng rng(seed);
    std::vector<T> v(n);
    for (auto& e : v) e = static_cast<T>(scale * rng.normal());
    return v;
}

// max(worst, e) for the worst error of a test, where a NaN e makes it infinite (chainlet/layer_check.hpp).
using chainlet::detail::worse;

// Largest error of g against central differences of f at p (chainlet::detail::central_differences and
// finite_difference_error, the layer checker's measure).
template <class F>
double gradient_error(F&& f, std::vector<double> p, const std::vector<double>& g, double h = 1e-5,
                      double floor = 1e-3) {
    return chainlet::detail::finite_difference_error(chainlet::detail::central_differences(std::move(p), f, h, false), g,
                                                     floor);
}

// Largest elementwise difference relative to max(|reference|, 1). Equal values (the same infinity, or
// NaN on both sides) differ by 0; any other NaN or infinity makes the difference infinite (std::max
// alone would pass over a NaN).
template <class A, class B>
double max_rel_diff(const A& a, const B& ref) {
    double worst = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        const auto x = static_cast<double>(a[i]), r = static_cast<double>(ref[i]);
        if (x == r || (std::isnan(x) && std::isnan(r))) continue;
        worst = worse(worst, std::abs(x - r) / std::max(std::abs(r), 1.0));
    }
    return worst;
}

// The layer checker on L bound to In (an Input), its report shown when it fails.
template <class L, class In, chainlet::RuleChecks rules = chainlet::RuleChecks::on>
void require_layer_check(const chainlet::LayerCheckOptions& o = {}) {
    const auto r = chainlet::check_layer<L, In, rules>(o);
    INFO(r.report());
    REQUIRE(r.passed());
}

// The layer checker (chainlet/layer_check.hpp) on a bound layer L for one chunk of n samples: returns
// the worst finite-difference error over the parameter and input gradients, or infinity (with the
// checker's report as a Catch message) when any other rule of the contract is broken. rules: whether the
// layer's derivative rules are checked too (and fail it when wrong).
template <class L, chainlet::RuleChecks rules = chainlet::RuleChecks::on>
double layer_gradient_error(std::size_t n, std::uint64_t seed) {
    chainlet::LayerCheckOptions o;
    o.chunk_sizes = {n};
    o.seed = seed;
    o.tolerance = std::numeric_limits<double>::infinity();  // the caller compares the error
    const auto r = chainlet::check_bound_layer<L, rules>(o);
    if (!r.passed()) {
        UNSCOPED_INFO(r.report());
        return std::numeric_limits<double>::infinity();
    }
    return std::max(r.parameter_gradient_error, r.input_gradient_error);
}

}  // namespace test
