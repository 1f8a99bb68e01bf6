// Time to a target loss (bench/optimizers.cpp, bench/optimizers_pinn.cpp): each optimiser's trace of
// (wall time, iteration, loss), recorded until a time budget, and when it first reached a target.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace bench {

struct Trace {
    using clock = std::chrono::steady_clock;
    clock::time_point start = clock::now();
    std::vector<double> seconds, loss;
    std::vector<std::size_t> iteration;

    // Notes iteration k's loss; true once the budget (seconds) is spent, to stop the optimiser.
    bool record(std::size_t k, double l, double budget) {
        seconds.push_back(std::chrono::duration<double>(clock::now() - start).count());
        loss.push_back(l);
        iteration.push_back(k);
        return seconds.back() > budget;
    }
    double last_loss(double initial) const { return loss.empty() ? initial : loss.back(); }
};

// The first point of the trace at or below target: "seconds (iterations)", or "-" when never reached.
inline std::string reached(const Trace& t, double target) {
    for (std::size_t i = 0; i < t.loss.size(); ++i)
        if (t.loss[i] <= target) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "%.3f s (%zu)", t.seconds[i], t.iteration[i]);
            return buf;
        }
    return "-";
}

}  // namespace bench
