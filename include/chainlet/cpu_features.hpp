// A one-line description of the machine and build, for logs and benchmark reports.
#pragma once

#include <string>

namespace chainlet {

std::string cpu_model();     // the CPU's model name from /proc/cpuinfo
std::string build_report();  // CPU, the SIMD target compiled in, the default thread count

}  // namespace chainlet
