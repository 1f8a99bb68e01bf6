// examples/pinn: the runs of Net (pinn.hpp), in float and double.
#include "pinn/pinn.hpp"

namespace pinn {
PINN_RUN_INSTANCES(template, Net)
}  // namespace pinn
