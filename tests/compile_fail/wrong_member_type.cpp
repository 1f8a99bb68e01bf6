// A user layer whose out_shape is not a Shape (a member of the wrong type): one error.
#include "chainlet/chainlet.hpp"

struct WrongShape {
    template <class InShape>
    struct bound {
        static constexpr std::size_t in_size = InShape::size, out_size = InShape::size;
        using out_shape = int;
        static constexpr std::size_t num_params = 0, saved_per_sample = 0, scratch_per_sample = 0;
    };
};

using Net = chainlet::Chain<chainlet::Input<4>, WrongShape, chainlet::Dense<1>>;
int main() { return static_cast<int>(Net::num_params); }
