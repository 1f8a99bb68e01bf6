// A user layer whose bound derives from Dense's and doubles the output (its own forward and pullback):
// it inherits Dense's jet_rule, which would compute a plain Dense's derivatives (half of this layer's).
// The input-derivative pass refuses it with one static_assert (jet.hpp) instead of a wrong result.
#include <cstddef>

#include "chainlet/chainlet.hpp"
#include "chainlet/derivatives/taylor.hpp"

struct DoubledDense {
    template <class InShape>
    struct bound : chainlet::Dense<8, chainlet::Tanh>::bound<InShape> {
        using base = chainlet::Dense<8, chainlet::Tanh>::bound<InShape>;
        template <class T>
        static void forward(const T* p, const T* x, T* y, T* saved, std::size_t n) {
            base::forward(p, x, y, saved, n);
            for (std::size_t i = 0; i < base::out_size * n; ++i) y[i] *= T(2);
        }
        template <class T>
        static void pullback(const T* p, T* g, const T* x, const T* y, T* saved, T* scratch, T* dy, T* dx,
                             std::size_t n) {
            for (std::size_t i = 0; i < base::out_size * n; ++i) dy[i] *= T(2);
            base::pullback(p, g, x, y, saved, scratch, dy, dx, n);
        }
    };
};

using Net = chainlet::Chain<chainlet::Input<2>, DoubledDense, chainlet::Dense<1>>;
int main() {
    chainlet::DerivativeWorkspace<Net, double> ws(chainlet::DerivativeSpec::laplacian(2), 16, 1);
    return static_cast<int>(ws.chunk());
}
