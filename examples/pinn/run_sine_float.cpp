// examples/pinn: the run of SineNet (pinn.hpp) in float.
#include "pinn/pinn.hpp"

namespace pinn {
PINN_RUN_INSTANCE(template, SineNet, float)
}  // namespace pinn
