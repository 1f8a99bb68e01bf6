// examples/pinn: the runs of FourierNet (pinn.hpp), in float and double.
#include "pinn/pinn.hpp"

namespace pinn {
PINN_RUN_INSTANCES(template, FourierNet)
}  // namespace pinn
