// The thin layer over OpenMP: a parallel loop over independent work items that tells each item
// which thread runs it (to pick that thread's scratch). Without OpenMP everything runs serially.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace chainlet {

// The number of threads used when the caller asks for 0 ("all"): OpenMP's default (OMP_NUM_THREADS,
// else the number of cores).
inline int default_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

inline int resolve_threads(int threads) { return threads > 0 ? threads : default_threads(); }

namespace detail {
// Called in a catch block inside a parallel loop: keeps the first exception any thread caught.
inline void keep_first_exception(std::exception_ptr& error) {
#ifdef _OPENMP
#pragma omp critical(chainlet_parallel_for_error)
#endif
    if (!error) error = std::current_exception();
}
}  // namespace detail

// Calls f(i, thread) for i in [0, n) on up to `threads` threads; thread is in [0, threads).
// Work items must not depend on which thread runs them. An exception thrown by f stops the loop and
// is rethrown here (the first one, if several threads throw).
template <class F>
void parallel_for(std::size_t n, int threads, F&& f) {
#ifdef _OPENMP
    if (threads > 1 && n > 1) {
        std::exception_ptr error;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
        for (std::size_t i = 0; i < n; ++i) {
            try {
                f(i, omp_get_thread_num());
            } catch (...) {
                detail::keep_first_exception(error);
            }
        }
        if (error) std::rethrow_exception(error);
        return;
    }
#endif
    (void)threads;
    for (std::size_t i = 0; i < n; ++i) f(i, 0);
}

// Calls work(i, thread) for i in [0, n) on up to min(threads, n) threads (so every thread id is below
// both: a caller may size per-thread buffers by either) and, after each, in_order(i, thread)
// on the same thread, the in_order calls one at a time in increasing i (OpenMP's ordered construct; the
// items are handed out in increasing order, so a thread waits only for items already running). What
// in_order does therefore happens in one order whatever the thread count: this is how a sum of
// per-item partial results keeps its bits while holding one partial per thread, not one per item.
// An exception from work(i) or in_order(i) stops the in_order calls from item i on (those before it
// have run, as on one thread) and is rethrown here (the first one, if several threads throw).
template <class Work, class InOrder>
void parallel_for_ordered(std::size_t n, int threads, Work&& work, InOrder&& in_order) {
#ifdef _OPENMP
    if (threads > 1 && n > 1) {
        const int team = static_cast<int>(std::min(static_cast<std::size_t>(threads), n));
        std::exception_ptr error;
        bool stopped = false;  // read and written inside the ordered regions only
#pragma omp parallel for ordered num_threads(team) schedule(dynamic, 1)
        for (std::size_t i = 0; i < n; ++i) {
            const int tid = omp_get_thread_num();
            bool done = true;
            try {
                work(i, tid);
            } catch (...) {
                done = false;
                detail::keep_first_exception(error);
            }
#pragma omp ordered
            {
                stopped = stopped || !done;
                if (!stopped) try {
                        in_order(i, tid);
                    } catch (...) {
                        stopped = true;
                        detail::keep_first_exception(error);
                    }
            }
        }
        if (error) std::rethrow_exception(error);
        return;
    }
#endif
    (void)threads;
    for (std::size_t i = 0; i < n; ++i) {
        work(i, 0);
        in_order(i, 0);
    }
}

}  // namespace chainlet
