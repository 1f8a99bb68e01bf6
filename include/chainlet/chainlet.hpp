// chainlet: small neural networks, statically sized, trained fast on the CPU. One include for all.
#pragma once

#include "chainlet/activations.hpp"
#include "chainlet/chain.hpp"
#include "chainlet/cpu_features.hpp"
#include "chainlet/init.hpp"
#include "chainlet/layers/conv.hpp"
#include "chainlet/layers/dense.hpp"
#include "chainlet/layers/flatten.hpp"
#include "chainlet/layers/maxpool.hpp"
#include "chainlet/losses.hpp"
#include "chainlet/optim/adam.hpp"
#include "chainlet/optim/sgd.hpp"
#include "chainlet/pullback.hpp"
#include "chainlet/shape.hpp"
#include "chainlet/train.hpp"
#include "chainlet/workspace.hpp"
