// A user's activation without a jet fused into a Dense, and another as an ActivationLayer: the parameter
// Hessian-vector product names the missing jet in one static_assert per layer, not its "no rule for this
// layer" error.
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/hvp.hpp"

struct Cube {  // z^3
    static constexpr const char* name = "cube";
    static constexpr bool derivative_from_output = false;
    template <class V>
    static V value(V z) { return z * z * z; }
    template <class V>
    static V pullback(V dy, V z) { return dy * V(3) * z * z; }
};
struct Square {  // z^2
    static constexpr const char* name = "square";
    static constexpr bool derivative_from_output = false;
    template <class V>
    static V value(V z) { return z * z; }
    template <class V>
    static V pullback(V dy, V z) { return dy * V(2) * z; }
};

using Net = chainlet::Chain<chainlet::Input<2>, chainlet::Dense<3, Cube>, chainlet::ActivationLayer<Square>,
                            chainlet::Dense<1>>;
int main() {
    chainlet::HessianVectorWorkspace<Net, double> ws(16, 1);
    std::vector<double> p(Net::num_params), v(Net::num_params), g(Net::num_params), hv(Net::num_params), x(2), t(1);
    return static_cast<int>(ws.hvp(p, v, g, hv, x, t));
}
