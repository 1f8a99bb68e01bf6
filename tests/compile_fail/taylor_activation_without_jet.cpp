// A user's activation without a jet (the Activation concept does not ask for one) fused into a Dense, and
// another as an ActivationLayer inside a Residual: the input-derivative pass names the missing jet in one
// static_assert per layer, not its "no rule for this layer" error (the layers are Dense and
// ActivationLayer, which it supports).
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/taylor.hpp"

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

using Net = chainlet::Chain<chainlet::Input<2>, chainlet::Dense<4, Cube>,
                            chainlet::Residual<chainlet::ActivationLayer<Square>>, chainlet::Dense<1>>;
int main() {
    chainlet::DerivativeWorkspace<Net, double> ws(chainlet::DerivativeSpec::laplacian(2), 16, 1);
    std::vector<double> p(Net::num_params), x(2), out(4);
    ws.derivatives(p, x, out);
    return 0;
}
