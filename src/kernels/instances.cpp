// The explicit instantiation definitions of the kernel instances that include/chainlet/kernel_instances.hpp
// declares. The build compiles this file once per activation (and once for the linear products), from
// wrappers that CMakeLists.txt generates, so that the instances compile in parallel: each wrapper
// defines CHAINLET_KERNEL_INSTANCES_OF to the activation (and CHAINLET_KERNEL_INSTANCES_FEW_INPUTS where
// the header lists its few-input forms), or CHAINLET_KERNEL_INSTANCES_LINEAR. A wrapper missing against
// the header's lists is an undefined symbol where a program uses the instance; an extra one only compiles
// instances no declaration points to.
#define CHAINLET_DEFINING_KERNEL_INSTANCES
#include "chainlet/kernel_instances.hpp"

#define CHAINLET_DEFINE_NN_PANEL(E, I, T, AOff, BOff, ARs, KR) \
    CHAINLET_NN_PANEL_INSTANCE(template, E, I, T, AOff, BOff, ARs, KR)

#if defined(CHAINLET_KERNEL_INSTANCES_LINEAR)
CHAINLET_LINEAR_INSTANCES(CHAINLET_DEFINE_NN_PANEL, float)
CHAINLET_LINEAR_INSTANCES(CHAINLET_DEFINE_NN_PANEL, double)
#elif defined(CHAINLET_KERNEL_INSTANCES_OF)
CHAINLET_ACTIVATION_INSTANCES(CHAINLET_DEFINE_NN_PANEL, CHAINLET_KERNEL_INSTANCES_OF, float)
CHAINLET_ACTIVATION_INSTANCES(CHAINLET_DEFINE_NN_PANEL, CHAINLET_KERNEL_INSTANCES_OF, double)
#if defined(CHAINLET_KERNEL_INSTANCES_FEW_INPUTS)
CHAINLET_FEW_INPUTS_INSTANCES(CHAINLET_DEFINE_NN_PANEL, CHAINLET_KERNEL_INSTANCES_OF, float)
CHAINLET_FEW_INPUTS_INSTANCES(CHAINLET_DEFINE_NN_PANEL, CHAINLET_KERNEL_INSTANCES_OF, double)
#endif
#else
#error "compile through a wrapper that defines CHAINLET_KERNEL_INSTANCES_OF or CHAINLET_KERNEL_INSTANCES_LINEAR"
#endif
