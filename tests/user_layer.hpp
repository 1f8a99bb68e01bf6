// The user-defined layer of docs/api.md ("Your own layer"), compiled from the document itself
// (tests/CMakeLists.txt copies its marked block into user_layer_doc.hpp): a per-feature scale and shift,
// y = a .* x + b, with its derivative rules. test_user_layer checks and trains it, torch_crosscheck
// cross-checks it against PyTorch.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "chainlet/jet.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"

#include "user_layer_doc.hpp"
