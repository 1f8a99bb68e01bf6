// The thin layer over OpenMP: a parallel loop over independent work items that tells each item
// which thread runs it (to pick that thread's scratch). Without OpenMP everything runs serially.
#pragma once

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
#pragma omp critical(chainlet_parallel_for_error)
                if (!error) error = std::current_exception();
            }
        }
        if (error) std::rethrow_exception(error);
        return;
    }
#endif
    (void)threads;
    for (std::size_t i = 0; i < n; ++i) f(i, 0);
}

}  // namespace chainlet
