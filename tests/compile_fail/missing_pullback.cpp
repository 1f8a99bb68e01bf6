// A user layer without a pullback: one error naming the missing member.
#include "chainlet/chainlet.hpp"

struct NoPullback {
    template <class InShape>
    struct bound {
        static constexpr std::size_t in_size = InShape::size, out_size = InShape::size;
        using out_shape = InShape;
        static constexpr std::size_t num_params = 0, saved_per_sample = 0, scratch_per_sample = 0;
        template <class T>
        static void init(std::span<T>, chainlet::Rng&, chainlet::InitKind) {}
        template <class T>
        static void forward(const T*, const T* x, T* y, T*, std::size_t n) {
            std::copy_n(x, in_size * n, y);
        }
    };
};

using Net = chainlet::Chain<chainlet::Input<4>, chainlet::Dense<3>, NoPullback, chainlet::Dense<1>>;
int main() { return static_cast<int>(Net::num_params); }
