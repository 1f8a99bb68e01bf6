// A user's loss without the member template target<T> (docs/api.md, "Your own loss"): the Loss
// assertion comes first, not a missing member named by the entry point's target-type check; g++ 12
// gives the concept's reason (no target) as a second "error:" line, and nothing from fit's body.
#include <cstddef>
#include <span>
#include <vector>

#include "chainlet/chainlet.hpp"

struct NoTargetType {
    static std::size_t targets_per_sample(std::size_t k) { return k; }
    template <class T>
    static void check_targets(std::span<const T>, std::size_t) {}
    template <class T>
    static T value_and_gradient(const T*, const T*, T*, std::size_t, std::size_t, T) { return T(0); }
};

using Net = chainlet::Chain<chainlet::Input<2>, chainlet::Dense<1>>;
int main() {
    std::vector<float> p(Net::num_params), x(2 * 4), y(4);
    chainlet::Adam<float> opt(1e-3f);
    chainlet::fit<Net>(p, NoTargetType{}, x, y, opt);
}
