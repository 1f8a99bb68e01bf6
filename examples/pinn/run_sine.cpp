// examples/pinn: the runs of SineNet (pinn.hpp), in float and double.
#include "pinn/pinn.hpp"

namespace pinn {
PINN_RUN_INSTANCES(template, SineNet)
}  // namespace pinn
