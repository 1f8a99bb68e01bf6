// examples/pinn: the run of SineNet (pinn.hpp) in double.
#include "pinn/pinn.hpp"

namespace pinn {
PINN_RUN_INSTANCE(template, SineNet, double)
}  // namespace pinn
