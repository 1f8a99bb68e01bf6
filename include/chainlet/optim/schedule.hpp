// Learning-rate schedules for fit (FitOptions::schedule). A schedule maps where training is to a factor
// of the optimiser's learning rate at the start of fit: before every step fit sets the rate to
// base * factor(at), and after the last step it puts base back. Any callable of this signature
// (std::function<double(const ScheduleInput&)>) is a schedule; the ones below follow PyTorch's
// lr_scheduler classes StepLR, ExponentialLR, a linear warm-up then CosineAnnealingLR, and
// ReduceLROnPlateau. The epoch is counted within one fit call, and ReduceOnPlateau's state lives in the
// schedule object, not in checkpoints.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <string>

#include "chainlet/message.hpp"

namespace chainlet {

struct ScheduleInput {
    std::size_t step;             // the optimiser's step number, from 0 (continues in a resumed fit with Adam)
    std::size_t epoch;            // 1-based, within this fit
    std::size_t epochs;           // of this fit
    std::size_t steps_per_epoch;
    // The monitored metric after the previous epoch (the validation metric when fit has a validation
    // set, else the epoch's training loss); NaN during the first epoch.
    double metric;
    bool higher_is_better;        // of metric
};

using LearningRateSchedule = std::function<double(const ScheduleInput&)>;

// gamma^floor((epoch - 1) / every): the rate falls by gamma every `every` epochs (PyTorch's StepLR).
struct StepDecay {
    std::size_t every;
    double gamma;
    double operator()(const ScheduleInput& at) const {
        if (every == 0 || !(gamma > 0))
            throw std::invalid_argument("StepDecay: need every >= 1 and gamma > 0; got every " + std::to_string(every) +
                                        ", gamma " + detail::number(gamma));
        return std::pow(gamma, static_cast<double>((at.epoch - 1) / every));
    }
};

// gamma^(epoch - 1) (PyTorch's ExponentialLR, stepped once per epoch).
struct ExponentialDecay {
    double gamma;
    double operator()(const ScheduleInput& at) const {
        if (!(gamma > 0)) throw std::invalid_argument("ExponentialDecay: need gamma > 0; got " + detail::number(gamma));
        return std::pow(gamma, static_cast<double>(at.epoch - 1));
    }
};

// A linear warm-up over the first `warmup` steps (factor (s + 1) / warmup at step s), then half a cosine
// from 1 down to min_factor at step `total`, and min_factor after it:
//   factor(s) = min_factor + (1 - min_factor) (1 + cos(pi (s - warmup) / (total - warmup))) / 2.
struct CosineWarmup {
    std::size_t warmup;
    std::size_t total;
    double min_factor = 0;
    double operator()(const ScheduleInput& at) const {
        if (total <= warmup || !(min_factor >= 0 && min_factor <= 1))
            throw std::invalid_argument("CosineWarmup: need total > warmup and 0 <= min_factor <= 1; got warmup " +
                                        std::to_string(warmup) + ", total " + std::to_string(total) + ", min_factor " +
                                        detail::number(min_factor));
        if (at.step < warmup) return static_cast<double>(at.step + 1) / static_cast<double>(warmup);
        if (at.step >= total) return min_factor;
        const double x = static_cast<double>(at.step - warmup) / static_cast<double>(total - warmup);
        return min_factor + (1 - min_factor) * (1 + std::cos(std::numbers::pi * x)) / 2;
    }
};

// Multiplies the factor by `factor` when the monitored metric has not improved on its best by more than
// the relative `threshold` for more than `patience` epochs, and then waits `patience` epochs again
// (PyTorch's ReduceLROnPlateau, threshold_mode "rel", cooldown 0); never below min_factor. It keeps
// state: fit calls it once per step and it reads each epoch's metric once, when the epoch changes.
class ReduceOnPlateau {
public:
    explicit ReduceOnPlateau(double factor = 0.1, std::size_t patience = 10, double threshold = 1e-4,
                             double min_factor = 0)
        : factor_(factor), patience_(patience), threshold_(threshold), min_factor_(min_factor) {
        if (!(factor > 0 && factor < 1) || !(threshold >= 0) || !(min_factor >= 0))
            throw std::invalid_argument("ReduceOnPlateau: need 0 < factor < 1, threshold >= 0, min_factor >= 0; got factor " +
                                        detail::number(factor) + ", threshold " + detail::number(threshold) +
                                        ", min_factor " + detail::number(min_factor));
    }
    double operator()(const ScheduleInput& at) {
        if (at.epoch != seen_epoch_) {
            seen_epoch_ = at.epoch;
            if (!std::isnan(at.metric)) observe(at.higher_is_better ? -at.metric : at.metric);
        }
        return current_;
    }
    double factor() const { return current_; }

private:
    void observe(double m) {  // m: lower is better
        if (m < best_ - threshold_ * std::abs(best_) || std::isinf(best_)) {
            best_ = m;
            bad_ = 0;
        } else if (++bad_ > patience_) {
            current_ = std::max(min_factor_, current_ * factor_);
            bad_ = 0;
        }
    }
    double factor_;
    std::size_t patience_;
    double threshold_, min_factor_;
    double best_ = std::numeric_limits<double>::infinity(), current_ = 1;
    std::size_t bad_ = 0, seen_epoch_ = 0;
};

}  // namespace chainlet
