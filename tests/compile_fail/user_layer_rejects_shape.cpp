// Must not compile: a user's layer that takes flat inputs only, put after an image, in a chain and in the
// layer checker. Its rejects_shape (docs/api.md, "Your own layer") makes its own message the only error.
#include <cstddef>
#include <span>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/layer_check.hpp"

// y = a .* x (one weight per feature), for flat inputs only. Pullback: da += sum_s dy .* x, dx = a .* dy.
struct FlatScale {
    template <class InShape>
    struct bound {
        static constexpr bool rejects_shape = [] {
            static_assert(InShape::rank == 1, "FlatScale needs a flat input: put chainlet::Flatten before it");
            return InShape::rank != 1;
        }();
        static constexpr std::size_t in_size = InShape::size, out_size = InShape::size;
        using out_shape = InShape;
        static constexpr std::size_t num_params = in_size, saved_per_sample = 0, scratch_per_sample = 0;
        template <class T>
        static void init(std::span<T> p, chainlet::Rng&, chainlet::InitKind) {
            for (T& a : p) a = T(1);
        }
        template <class T>
        static void forward(const T* p, const T* x, T* y, T*, std::size_t n) {
            for (std::size_t f = 0; f < in_size; ++f)
                for (std::size_t s = 0; s < n; ++s) y[f * n + s] = p[f] * x[f * n + s];
        }
        template <class T>
        static void pullback(const T* p, T* g, const T* x, const T*, T*, T*, T* dy, T* dx, std::size_t n) {
            for (std::size_t f = 0; f < in_size; ++f)
                for (std::size_t s = 0; s < n; ++s) {
                    g[f] += dy[f * n + s] * x[f * n + s];
                    if (dx) dx[f * n + s] = p[f] * dy[f * n + s];
                }
        }
    };
};

using Net = chainlet::Chain<chainlet::Input<4, 4, 1>, FlatScale, chainlet::Dense<1>>;
int main() {
    std::vector<float> p(Net::num_params), x(Net::in_size * 4), y(Net::out_size * 4);
    chainlet::predict<Net>(p, x, y);
    return chainlet::check_layer<FlatScale, chainlet::Input<4, 4, 1>>().passed() ? 0 : 1;
}
