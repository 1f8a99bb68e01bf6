// The thin layer over OpenMP: a parallel loop over independent work items that tells each item
// which thread runs it (to pick that thread's scratch). Without OpenMP everything runs serially.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>

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
// The threads a parallel loop over n items on `threads` threads runs on: no more than the items, at least one.
inline std::size_t team_size(std::size_t n, int threads) {
    return std::min(static_cast<std::size_t>(std::max(threads, 1)), std::max<std::size_t>(n, 1));
}

// Called in a catch block inside a parallel loop: keeps the first exception any thread caught.
inline void keep_first_exception(std::exception_ptr& error) {
#ifdef _OPENMP
#pragma omp critical(chainlet_parallel_for_error)
#endif
    if (!error) error = std::current_exception();
}

// Waits until ready() is true: spinning (x86's pause leaves the core's resources to a hyper-thread),
// and yielding the core after a while, in case the thread it waits for shares it.
template <class Ready>
void spin_until(Ready&& ready) {
    for (unsigned spin = 0; !ready(); ++spin) {
        if (spin < 4096) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else {
            std::this_thread::yield();
        }
    }
}
}  // namespace detail

// Calls f(i, thread) for i in [0, n) on up to `threads` threads; thread is in [0, threads).
// Work items must not depend on which thread runs them. An exception thrown by f stops the loop (items
// not yet started are skipped) and is rethrown here (the first one, if several threads throw).
//
// The items are handed out one at a time from an atomic counter, as OpenMP's schedule(dynamic, 1)
// would, but without OpenMP's loop dispatch: LLVM's libomp allocates in it (__kmpc_dispatch_next_8u,
// from a training step on 2 threads; docs/robustness.md), and nothing here may allocate in a step.
template <class F>
void parallel_for(std::size_t n, int threads, F&& f) {
#ifdef _OPENMP
    if (threads > 1 && n > 1) {
        const int team = static_cast<int>(detail::team_size(n, threads));
        std::atomic<std::size_t> next{0};
        std::atomic<bool> stopped{false};
        std::exception_ptr error;
#pragma omp parallel num_threads(team)
        {
            const int tid = omp_get_thread_num();
            for (std::size_t i = next.fetch_add(1); i < n && !stopped.load(); i = next.fetch_add(1)) {
                try {
                    f(i, tid);
                } catch (...) {
                    detail::keep_first_exception(error);
                    stopped.store(true);
                }
            }
        }
        if (error) std::rethrow_exception(error);
        return;
    }
#endif
    (void)threads;
    for (std::size_t i = 0; i < n; ++i) f(i, 0);
}

// How many partial-result buffers ("slots") parallel_for_ordered hands out for n items on `threads`
// threads: one on one thread, else twice the team (at most n), so that a thread may run up to about
// one item per slot ahead of the earliest item still in work (see there).
// At most max_ordered_slots, so that their bookkeeping lives on the stack (no allocation in a step).
inline constexpr std::size_t max_ordered_slots = 64;
inline std::size_t ordered_slots(std::size_t n, int threads) {
    const std::size_t team = detail::team_size(n, threads);
    return team <= 1 ? 1 : std::min({n, 2 * team, max_ordered_slots});
}

// Calls work(i, thread, slot) for i in [0, n) on up to min(threads, n) threads (so every thread id is
// below both), and in_order(i, slot) after each, one at a time in increasing i, with the slot its work
// wrote: what in_order does happens in one order whatever the thread count. This is how a sum of
// per-item partial results keeps its bits while holding ordered_slots(n, threads) partials, not one
// per item: work(i) writes its partial into slot `slot` (in [0, ordered_slots(n, threads))), which
// belongs to item i until its in_order call has returned.
//
// The items are handed out in increasing order, each with a free slot. A thread that finishes item i
// parks its slot and, unless items before i are still in work, adds the parked items in order itself
// (in_order may run on another thread than work, never on two at once); it then takes the next item
// at once, with another slot. A thread waits only when every slot is taken. So a thread slowed by
// others on its core (a shared machine's neighbour) delays the sums, not the other threads' work: with
// OpenMP's ordered construct (before) a thread finishing item i waited for item i - 1's work before
// it could take the next, and the team ran at the slowest thread's pace.
//
// An exception from work(i) or in_order(i) stops the in_order calls from item i on (those before it
// have run, as on one thread) and is rethrown here (the first one, if several threads throw).
template <class Work, class InOrder>
void parallel_for_ordered(std::size_t n, int threads, Work&& work, InOrder&& in_order) {
#ifdef _OPENMP
    if (threads > 1 && n > 1) {
        const int team = static_cast<int>(detail::team_size(n, threads));
        const std::size_t slots = ordered_slots(n, threads);
        // Item i works in slot i % slots, free once item i - slots has been added. finished[s] = i + 1
        // once item i's work in slot s is done (ok[s]: without an exception); `adding` lets one thread
        // at a time make the in_order calls, `added` of them so far.
        std::atomic<std::size_t> next{0}, added{0};
        std::atomic<bool> adding{false}, stopped{false};
        std::array<std::atomic<std::size_t>, max_ordered_slots> finished;
        std::array<std::atomic<bool>, max_ordered_slots> ok;
        for (std::size_t s = 0; s < slots; ++s) {
            finished[s].store(0, std::memory_order_relaxed);
            ok[s].store(true, std::memory_order_relaxed);
        }
        std::exception_ptr error;
        // Makes the in_order calls of the finished items that are next in order; returns at once if another
        // thread is making them (that one looks again after letting go, so an item finished meanwhile is
        // not left behind: of its store to finished and our look at adding, one sees the other).
        const auto add_finished = [&] {
            const auto next_finished = [&](std::size_t k) {
                return k < n && !stopped.load() && finished[k % slots].load() == k + 1;
            };
            for (;;) {
                bool expected = false;
                if (!adding.compare_exchange_strong(expected, true)) return;
                std::size_t k = added.load();
                for (; next_finished(k); added.store(++k)) {
                    if (!ok[k % slots].load()) {
                        stopped.store(true);
                        break;
                    }
                    try {
                        in_order(k, k % slots);
                    } catch (...) {
                        detail::keep_first_exception(error);
                        stopped.store(true);
                        break;
                    }
                }
                adding.store(false);
                if (!next_finished(k)) return;
            }
        };
#pragma omp parallel num_threads(team)
        {
            const int tid = omp_get_thread_num();
            for (;;) {
                const std::size_t i = next.fetch_add(1);
                if (i >= n || stopped.load()) break;
                detail::spin_until([&] { return stopped.load() || added.load() + slots > i; });
                if (stopped.load()) break;
                const std::size_t slot = i % slots;
                bool done = true;
                try {
                    work(i, tid, slot);
                } catch (...) {
                    done = false;
                    detail::keep_first_exception(error);
                }
                ok[slot].store(done);
                finished[slot].store(i + 1);
                add_finished();
            }
        }
        if (error) std::rethrow_exception(error);
        return;
    }
#endif
    (void)threads;
    for (std::size_t i = 0; i < n; ++i) {
        work(i, 0, std::size_t(0));
        in_order(i, std::size_t(0));
    }
}

}  // namespace chainlet
