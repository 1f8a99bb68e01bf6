// What this machine is and what chainlet was compiled for: printed by the examples and benchmarks so
// that every figure comes with its context.
#include "chainlet/cpu_features.hpp"

#include <fstream>
#include <sstream>
#include <string>

#include "chainlet/kernels/simd.hpp"
#include "chainlet/parallel.hpp"

namespace chainlet {

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0) {
            const auto colon = line.find(':');
            if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
        }
    return "unknown CPU";
}

std::string build_report() {
    std::ostringstream s;
    s << "chainlet: cpu=\"" << cpu_model() << "\" simd=" << simd::arch_name << " threads=" << default_threads();
    return s.str();
}

}  // namespace chainlet
