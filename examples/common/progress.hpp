// A progress bar for long training runs, on standard error. On a terminal it redraws one line
// ("epoch 3 [#########.......] 57% loss 0.41"); elsewhere (a log file, CI) it prints the epoch's
// progress in tenths on one line, so logs stay short.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdio>

namespace examples {

class Progress {
public:
    Progress() : tty_(isatty(STDERR_FILENO) != 0) {}

    void update(std::size_t epoch, std::size_t step, std::size_t steps, double loss) {
        const int tenth = static_cast<int>(10 * step / steps);
        if (tty_) {
            const int width = 30, done = static_cast<int>(static_cast<double>(width) * static_cast<double>(step) /
                                                          static_cast<double>(steps));
            if (step != steps && step % 8 != 1) return;  // redraw every 8 steps
            std::fprintf(stderr, "\repoch %zu [", epoch);
            for (int i = 0; i < width; ++i) std::fputc(i < done ? '#' : '.', stderr);
            std::fprintf(stderr, "] %3zu%% loss %.4f", 100 * step / steps, loss);
        } else {
            if (step == 1) std::fprintf(stderr, "epoch %zu:", epoch);
            if (tenth == last_tenth_) return;
            std::fprintf(stderr, " %d%%", 10 * tenth);
        }
        last_tenth_ = tenth;
        open_ = true;
        std::fflush(stderr);
    }

    // Ends the current bar's line.
    void finish() {
        if (open_) std::fputc('\n', stderr);
        open_ = false;
        last_tenth_ = -1;
    }

private:
    bool tty_;
    bool open_ = false;
    int last_tenth_ = -1;
};

}  // namespace examples
