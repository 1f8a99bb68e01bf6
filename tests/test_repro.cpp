// Reproducibility and thread safety: the same seed gives the same bits on 1, 2 or 3 threads (OpenMP
// may run 3 threads on 2 cores), for batches spanning several chunks and chunk groups; and predict /
// value_and_gradient called at once from several std::threads on shared parameters, each with its own
// workspace, give the serial results bit for bit.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "support.hpp"

namespace test_repro {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;
using Dense3 = Chain<Input<4>, Dense<32, Tanh>, Dense<16, Tanh>, Dense<4>>;
using SmallConv = Chain<Input<8, 8, 1>, Conv<3, 3, 4, ReLU>, MaxPool<2, 2>, Flatten, Dense<10>>;

namespace {

std::vector<std::int32_t> random_labels(std::size_t n, std::uint64_t seed) {
    Rng rng(seed);
    std::vector<std::int32_t> y(n);
    for (auto& v : y) v = static_cast<std::int32_t>(rng.below(10));
    return y;
}

template <class Net, class Loss, class Y>
std::vector<float> train(const std::vector<float>& x, const Y& y, std::size_t batch, std::size_t epochs, int threads) {
    std::vector<float> p(Net::num_params);
    init_params<Net>(p, 5);
    Adam opt(1e-3f);
    FitOptions o;
    o.epochs = epochs;
    o.batch = batch;
    o.seed = 9;
    o.threads = threads;
    fit<Net>(p, Loss{}, x, y, opt, o);
    return p;
}

}  // namespace

TEST_CASE("repro: a batch is cut into the fewest chunks of at most `chunk` samples, equal up to 16, none empty",
          "[repro][parallel]") {
    auto check = [](auto ws_type) {
        using WS = decltype(ws_type);
        for (std::size_t n = 1; n <= 40 * WS::chunk + 3; n += (n < 3 * WS::chunk ? 1 : 7)) {
            const std::size_t chunks = WS::num_chunks(n), size = WS::chunk_size(n);
            INFO("chunk " << WS::chunk << ", n " << n << ": " << chunks << " chunks of " << size);
            REQUIRE(chunks == (n + WS::chunk - 1) / WS::chunk);  // the fewest
            REQUIRE(size <= WS::chunk);
            REQUIRE(chunks * size >= n);        // all samples
            REQUIRE((chunks - 1) * size < n);   // the last chunk not empty
            if (chunks > 1) {
                REQUIRE(size % 16 == 0);
                REQUIRE(n - (chunks - 1) * size + 16 * chunks >= size);  // the last at most 16 per chunk short
            }
        }
    };
    check(Workspace<Dense3, float>{});     // chunk 768 (AVX-512) or 576
    check(Workspace<Chain<Input<28, 28, 1>, Conv<5, 5, 6, ReLU>, Flatten, Dense<10>>, float>{});  // chunk 16
    check(Workspace<Dense3, double>{});
    // 640 bytes a sample: 512 KiB of activations with 512-bit vectors, 384 KiB elsewhere (workspace.hpp)
    constexpr bool avx512 = simd::width<float> == 16;
    REQUIRE(Workspace<Dense3, float>::chunk == (avx512 ? 768 : 576));
    // 13 chunks of 720 and one of 640, or 17 of 560 and one of 480
    REQUIRE(Workspace<Dense3, float>::chunk_size(10000) == (avx512 ? 720 : 560));
}

TEST_CASE("repro: a dense chain trains to the same bits on 1, 2 and 3 threads (batches of many chunk groups)", "[repro][parallel]") {
    using WS = Workspace<Dense3, float>;
    // A full batch of more than max_groups chunks (so groups hold several chunks) and a last, partial one.
    const std::size_t batch = WS::chunk * (WS::max_groups + 5) + 7, n = 2 * batch + 300;
    REQUIRE(WS::num_groups(batch) > 1);
    REQUIRE(WS::chunks_per_group(batch) > 1);
    const auto x = test::random_vector<float>(4 * n, 1), y = test::random_vector<float>(4 * n, 2);
    const auto p1 = train<Dense3, SquaredError>(x, y, batch, 2, 1);
    const auto p2 = train<Dense3, SquaredError>(x, y, batch, 2, 2);
    const auto p3 = train<Dense3, SquaredError>(x, y, batch, 2, 3);
    std::vector<float> p0(Dense3::num_params);
    init_params<Dense3>(p0, 5);
    REQUIRE(p1 != p0);  // training moved the parameters
    REQUIRE(p1 == p2);
    REQUIRE(p1 == p3);
}

TEST_CASE("repro: a small conv chain trains to the same bits on 1, 2 and 3 threads", "[repro][parallel]") {
    using WS = Workspace<SmallConv, float>;
    const std::size_t batch = 3 * WS::chunk + 5, n = 3 * batch;
    const auto x = test::random_vector<float>(SmallConv::in_size * n, 3);
    const auto y = random_labels(n, 4);
    const auto p1 = train<SmallConv, SoftmaxCrossEntropy>(x, y, batch, 2, 1);
    const auto p2 = train<SmallConv, SoftmaxCrossEntropy>(x, y, batch, 2, 2);
    const auto p3 = train<SmallConv, SoftmaxCrossEntropy>(x, y, batch, 2, 3);
    REQUIRE(p1 == p2);
    REQUIRE(p1 == p3);
}

TEST_CASE("repro: a chain with Dropout and LayerNorm trains to the same bits on 1, 2 and 3 threads", "[repro][parallel][dropout]") {
    using WithDropout = Chain<Input<4>, Dense<32, Tanh>, Dropout<20>, LayerNorm, Dense<16, SiLU>, Dropout<1, 3>, Dense<4>>;
    using WS = Workspace<WithDropout, float>;
    const std::size_t batch = 5 * WS::chunk + 3, n = 2 * batch + 11;  // several chunks, a short last batch
    const auto x = test::random_vector<float>(4 * n, 14), y = test::random_vector<float>(4 * n, 15);
    const auto p1 = train<WithDropout, SquaredError>(x, y, batch, 2, 1);
    const auto p2 = train<WithDropout, SquaredError>(x, y, batch, 2, 2);
    const auto p3 = train<WithDropout, SquaredError>(x, y, batch, 2, 3);
    REQUIRE(p1 == p2);
    REQUIRE(p1 == p3);
}

TEST_CASE("repro: value_and_gradient and predict give the same bits on 1, 2 and 3 threads", "[repro][parallel]") {
    using WS = Workspace<Dense3, float>;
    for (std::size_t n : {std::size_t(1), WS::chunk - 1, 5 * WS::chunk + 3, WS::chunk * (2 * WS::max_groups + 1)}) {
        INFO("n=" << n);
        std::vector<float> p(Dense3::num_params);
        init_params<Dense3>(p, 7);
        const auto x = test::random_vector<float>(4 * n, 8), y = test::random_vector<float>(4 * n, 9);
        std::vector<float> g1(p.size()), out1(4 * n);
        WS ws;
        const float l1 = value_and_gradient<Dense3>(ws, p, g1, x, y, SquaredError{}, 1);
        predict<Dense3>(ws, p, x, out1, 1);
        for (int threads : {2, 3}) {
            std::vector<float> g(p.size()), out(4 * n);
            const float l = value_and_gradient<Dense3>(ws, p, g, x, y, SquaredError{}, threads);
            predict<Dense3>(ws, p, x, out, threads);
            REQUIRE(l == l1);
            REQUIRE(g == g1);
            REQUIRE(out == out1);
        }
    }
}

// parallel_for_ordered (parallel.hpp) is what keeps a sum of partial results in one order: its
// in_order calls must come one at a time, in item order, each with the slot that the item's work wrote,
// however long each item's work takes; and no slot may hold two items at once.
TEST_CASE("parallel_for_ordered: in_order calls in item order, with the item's slot, for 1, 2 and 3 threads", "[repro][parallel]") {
    for (int threads : {1, 2, 3}) {
        INFO("threads=" << threads);
        constexpr std::size_t n = 40;
        const std::size_t slots = ordered_slots(n, threads);
        REQUIRE(slots == (threads == 1 ? 1u : 2u * static_cast<std::size_t>(threads)));
        std::vector<std::size_t> slot_of(n, slots), order;
        std::vector<std::atomic<int>> holder(slots);  // the item in each slot, -1 when free
        for (auto& h : holder) h = -1;
        std::atomic<bool> shared{false}, bad_thread{false};
        bool right_slot = true, in_order_holds = true;
        parallel_for_ordered(
            n, threads,
            [&](std::size_t i, int tid, std::size_t slot) {
                if (tid < 0 || tid >= threads || slot >= slots) bad_thread = true;
                int free = -1;
                if (!holder[slot].compare_exchange_strong(free, static_cast<int>(i))) shared = true;
                // uneven work, so later items often finish first
                volatile double sink = 0;
                for (std::size_t k = 0; k < ((i * 7919) % 13) * 20000; ++k) sink = sink + 1.0;
                slot_of[i] = slot;
            },
            [&](std::size_t i, std::size_t slot) {
                order.push_back(i);
                right_slot = right_slot && slot_of[i] == slot;
                in_order_holds = in_order_holds && holder[slot] == static_cast<int>(i);
                holder[slot] = -1;
            });
        std::vector<std::size_t> expected(n);
        for (std::size_t i = 0; i < n; ++i) expected[i] = i;
        REQUIRE(order == expected);
        REQUIRE(right_slot);
        REQUIRE(in_order_holds);
        REQUIRE_FALSE(shared);
        REQUIRE_FALSE(bad_thread);
    }
}

#ifdef _OPENMP
// A slow item holds up the sums, not the other threads' work: while item 0 runs, the other thread works
// through the items that have a free slot (items 1-3 of 4 slots on 2 threads). With OpenMP's ordered
// construct it stopped after item 1, waiting for item 0's turn.
TEST_CASE("parallel_for_ordered: a slow item does not stop the other thread", "[repro][parallel]") {
    constexpr std::size_t n = 8;
    REQUIRE(ordered_slots(n, 2) == 4);
    std::atomic<int> done_while_slow{-1};
    std::atomic<int> done{0};
    std::vector<std::size_t> order;
    parallel_for_ordered(
        n, 2,
        [&](std::size_t i, int, std::size_t) {
            if (i == 0) {
                // wait (up to 2 s) for the other thread to finish 3 items, then note how many it did
                for (int t = 0; t < 200 && done < 3; ++t) std::this_thread::sleep_for(std::chrono::milliseconds(10));
                done_while_slow = done.load();
            }
            ++done;
        },
        [&](std::size_t i, std::size_t) { order.push_back(i); });
    REQUIRE(done_while_slow == 3);
    REQUIRE(order == std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7});
}
#endif

// More threads than items: the team is cut to the items, so a caller may size per-thread buffers by
// either count.
TEST_CASE("parallel_for_ordered: thread ids stay below the item count when threads exceed it", "[repro][parallel]") {
    for (std::size_t n : {std::size_t(2), std::size_t(3)}) {
        INFO("n=" << n);
        std::vector<int> worker(n, -1), team(n, 0);
        parallel_for_ordered(
            n, 8,
            [&](std::size_t i, int tid, std::size_t) {
                worker[i] = tid;
#ifdef _OPENMP
                team[i] = omp_get_num_threads();
#endif
            },
            [](std::size_t, std::size_t) {});
        for (std::size_t i = 0; i < n; ++i) {
            REQUIRE(worker[i] >= 0);
            REQUIRE(static_cast<std::size_t>(worker[i]) < n);
            REQUIRE(static_cast<std::size_t>(team[i]) <= n);
        }
    }
}

// An exception stops the in_order calls from its item on; the items before it still get theirs, as on
// one thread.
TEST_CASE("parallel_for_ordered: an exception stops the in_order calls and is rethrown", "[repro][parallel]") {
    for (int threads : {1, 2}) {
        INFO("threads=" << threads);
        std::vector<std::size_t> order;
        REQUIRE_THROWS_WITH(parallel_for_ordered(
                                20, threads,
                                [](std::size_t i, int, std::size_t) {
                                    if (i == 7) throw std::runtime_error("work 7");
                                    // items 0-6 slow, so item 7 may throw before they reach in_order
                                    volatile double sink = 0;
                                    for (std::size_t k = 0; k < (i < 7 ? 200000u : 0u); ++k) sink = sink + 1.0;
                                },
                                [&](std::size_t i, std::size_t) { order.push_back(i); }),
                            "work 7");
        REQUIRE(order == std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6});
        order.clear();
        REQUIRE_THROWS_WITH(parallel_for_ordered(
                                20, threads, [](std::size_t, int, std::size_t) {},
                                [&](std::size_t i, std::size_t) {
                                    if (i == 3) throw std::runtime_error("in order 3");
                                    order.push_back(i);
                                }),
                            "in order 3");
        REQUIRE(order == std::vector<std::size_t>{0, 1, 2});
    }
}

// parallel_for (parallel.hpp) hands items out from its own counter: each item runs exactly once, on a
// thread id below both the thread count and the item count.
TEST_CASE("parallel_for: every item once, thread ids in range, for 1, 2 and 3 threads", "[repro][parallel]") {
    for (int threads : {1, 2, 3}) {
        for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(2), std::size_t(37)}) {
            INFO("threads=" << threads << " n=" << n);
            std::vector<std::atomic<int>> runs(n);
            for (auto& r : runs) r = 0;
            std::atomic<bool> bad_thread{false};
            parallel_for(n, threads, [&](std::size_t i, int tid) {
                if (tid < 0 || tid >= threads || static_cast<std::size_t>(tid) >= n) bad_thread = true;
                ++runs[i];
                volatile double sink = 0;  // uneven work
                for (std::size_t k = 0; k < ((i * 7919) % 13) * 2000; ++k) sink = sink + 1.0;
            });
            for (std::size_t i = 0; i < n; ++i) REQUIRE(runs[i] == 1);
            REQUIRE_FALSE(bad_thread);
        }
    }
}

// An exception stops the loop: the items not yet handed out do not run, and the exception is rethrown.
TEST_CASE("parallel_for: an exception stops the loop and is rethrown", "[repro][parallel]") {
    for (int threads : {1, 2}) {
        INFO("threads=" << threads);
        constexpr std::size_t n = 1000;
        std::atomic<std::size_t> ran{0};
        REQUIRE_THROWS_WITH(parallel_for(n, threads,
                                         [&](std::size_t i, int) {
                                             if (i == 3) throw std::runtime_error("item 3");
                                             ++ran;
                                             std::this_thread::sleep_for(std::chrono::microseconds(200));
                                         }),
                            "item 3");
        // Without the stop all 999 other items run; with it, those started before the throw was seen: 3 on
        // one thread, a few more on two (100 leaves room for a thread held up 20 ms on a shared machine).
        if (threads == 1) REQUIRE(ran == 3);
        REQUIRE(ran < 100);
    }
}

TEST_CASE("concurrency: predict and value_and_gradient from 4 std::threads on shared parameters", "[concurrency]") {
    constexpr int callers = 4, rounds = 3;
    const std::size_t n = 700;  // two chunks of the conv chain's workspace or fewer: both paths
    std::vector<float> p(SmallConv::num_params);
    init_params<SmallConv>(p, 11);
    const auto x = test::random_vector<float>(SmallConv::in_size * n, 12);
    const auto y = random_labels(n, 13);
    // Serial references.
    std::vector<float> g_ref(p.size()), out_ref(10 * n);
    const float l_ref = value_and_gradient<SmallConv>(p, g_ref, x, y, SoftmaxCrossEntropy{});
    predict<SmallConv>(p, x, out_ref);

    struct Result {
        float loss = 0;
        std::vector<float> g, out, g_convenience;
        bool same = true;
    };
    std::vector<Result> results(callers);
    {
        std::vector<std::thread> pool;
        for (int c = 0; c < callers; ++c)
            pool.emplace_back([&, c] {
                Result& r = results[static_cast<std::size_t>(c)];
                Workspace<SmallConv, float> ws;  // each caller brings its own
                r.g.resize(p.size());
                r.g_convenience.resize(p.size());
                r.out.resize(10 * n);
                for (int k = 0; k < rounds; ++k) {
                    r.loss = value_and_gradient<SmallConv>(ws, p, r.g, x, y, SoftmaxCrossEntropy{});
                    predict<SmallConv>(ws, p, x, r.out);
                    // The convenience overloads use a workspace per thread.
                    value_and_gradient<SmallConv>(p, r.g_convenience, x, y, SoftmaxCrossEntropy{});
                    r.same = r.same && r.loss == l_ref && r.g == g_ref && r.out == out_ref && r.g_convenience == g_ref;
                }
            });
        for (auto& t : pool) t.join();
    }
    for (const auto& r : results) {
        REQUIRE(r.same);
        REQUIRE(r.loss == l_ref);
        REQUIRE(r.g == g_ref);
        REQUIRE(r.out == out_ref);
    }
}

}  // namespace test_repro
