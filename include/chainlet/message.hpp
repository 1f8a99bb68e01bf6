// Pieces of error messages (not of files): numbers in their shortest %g form, since std::to_string
// prints 1e-8 as "0.000000".
#pragma once

#include <cstdio>
#include <string>

namespace chainlet::detail {

inline std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

}  // namespace chainlet::detail
