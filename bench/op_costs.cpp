// What single AVX-512 operations cost on this core, alone and next to fused multiply-adds, the
// operation the kernels are bound by. For each operation, a loop of 8 independent instances, and the
// same 8 in a loop of 64 independent FMAs: the second loop's extra time is what the operation takes
// from the FMA pipes. Times are in FMA cycles, the time of one FMA in a loop of independent FMAs (one
// cycle where a core does one 512-bit FMA a cycle, as Zen 4; half a cycle with two FMA units).
// docs/profile.md has this table for a Zen 4: a division takes 2 FMA cycles there, an addition or a max
// none, so the rational tanh (9 multiplies or FMAs and a division) costs 11 FMA cycles a vector.
//   chainlet_op_costs   (x86-64 with AVX-512 only; prints a Markdown table)
#include <algorithm>
#include <chrono>
#include <cstdio>

#if defined(__x86_64__) && defined(__AVX512F__)

namespace {

constexpr long iterations = 1'000'000;
alignas(64) float ring[8 * 128];  // 8 blocks of 512 bytes, written in turn: 4 KiB, in L1
const float one = 1.0f;

// Nanoseconds per iteration of body, the best of 7 runs (a run that shares the core with a neighbour
// reads high; the cost of an operation is a best case).
template <class Body>
double best_ns(Body body) {
    double best = 1e30;
    for (int r = 0; r < 7; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        body();
        const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
        best = std::min(best, ns / iterations);
    }
    return best;
}

}  // namespace

// One timed loop, all of it in assembly: zmm30 and zmm31 hold 1.0 (the operands), zmm0-7 the FMA
// chains (from 0; 8 independent sums of 8 FMAs an iteration: 32 cycles of latency against 64 of
// throughput), zmm16-23 the measured operations' results; stores go to the ring at a 512-byte offset
// that turns every iteration.
#define CHAINLET_LOOP(body)                                                                                   \
    [] {                                                                                                      \
        long count = iterations, offset = 0;                                                                  \
        __asm__ volatile("vbroadcastss %[one], %%zmm30\n\tvbroadcastss %[one], %%zmm31\n\t"                 \
                         CHAINLET_8(CHAINLET_ZERO) "1:\n\t" body                                              \
                         "add $512, %[offset]\n\tand $4095, %[offset]\n\tdec %[count]\n\tjnz 1b\n\t"           \
                         : [count] "+r"(count), [offset] "+r"(offset)                                         \
                         : [ring] "r"(ring), [one] "m"(one)                                                   \
                         : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",     \
                           "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm30",  \
                           "xmm31");                                                                          \
    }
#define CHAINLET_8(op) op(0, 16) op(1, 17) op(2, 18) op(3, 19) op(4, 20) op(5, 21) op(6, 22) op(7, 23)
#define CHAINLET_ZERO(a, b) "vpxord %%zmm" #a ", %%zmm" #a ", %%zmm" #a "\n\t"
#define CHAINLET_FMA(a, b) "vfmadd231ps %%zmm30, %%zmm31, %%zmm" #a "\n\t"
#define CHAINLET_FMA64 \
    CHAINLET_8(CHAINLET_FMA) CHAINLET_8(CHAINLET_FMA) CHAINLET_8(CHAINLET_FMA) CHAINLET_8(CHAINLET_FMA) \
    CHAINLET_8(CHAINLET_FMA) CHAINLET_8(CHAINLET_FMA) CHAINLET_8(CHAINLET_FMA) CHAINLET_8(CHAINLET_FMA)
#define CHAINLET_ADD(a, b) "vaddps %%zmm30, %%zmm31, %%zmm" #b "\n\t"
#define CHAINLET_MUL(a, b) "vmulps %%zmm30, %%zmm31, %%zmm" #b "\n\t"
#define CHAINLET_MAX(a, b) "vmaxps %%zmm30, %%zmm31, %%zmm" #b "\n\t"
#define CHAINLET_AND(a, b) "vpandd %%zmm30, %%zmm31, %%zmm" #b "\n\t"
#define CHAINLET_MOVE(a, b) "vmovaps %%zmm30, %%zmm" #b "\n\t"
#define CHAINLET_DIV(a, b) "vdivps %%zmm30, %%zmm31, %%zmm" #b "\n\t"
#define CHAINLET_SQRT(a, b) "vsqrtps %%zmm30, %%zmm" #b "\n\t"
#define CHAINLET_RCP(a, b) "vrcp14ps %%zmm30, %%zmm" #b "\n\t"
#define CHAINLET_PERMT2(a, b) "vmovaps %%zmm30, %%zmm" #b "\n\tvpermt2ps %%zmm30, %%zmm31, %%zmm" #b "\n\t"
#define CHAINLET_PERM(a, b) "vpermps %%zmm30, %%zmm31, %%zmm" #b "\n\t"
#define CHAINLET_BROADCAST(a, b) "vbroadcastss %[one], %%zmm" #b "\n\t"
#define CHAINLET_LOAD(a, b) "vmovups " #a "*64(%[ring]), %%zmm" #b "\n\t"
#define CHAINLET_STORE(a, b) "vmovups %%zmm30, " #a "*64(%[ring],%[offset])\n\t"
#define CHAINLET_OP(name, op) \
    {name, CHAINLET_LOOP(CHAINLET_8(op)), CHAINLET_LOOP(CHAINLET_FMA64 CHAINLET_8(op))}

int main() {
    struct Op {
        const char* name;
        void (*alone)();
        void (*beside_fmas)();
    };
    const Op ops[] = {
        CHAINLET_OP("vaddps", CHAINLET_ADD),         CHAINLET_OP("vmulps", CHAINLET_MUL),
        CHAINLET_OP("vmaxps", CHAINLET_MAX),         CHAINLET_OP("vpandd", CHAINLET_AND),
        CHAINLET_OP("vmovaps (register)", CHAINLET_MOVE), CHAINLET_OP("vdivps", CHAINLET_DIV),
        CHAINLET_OP("vsqrtps", CHAINLET_SQRT),       CHAINLET_OP("vrcp14ps", CHAINLET_RCP),
        CHAINLET_OP("vmovaps + vpermt2ps", CHAINLET_PERMT2), CHAINLET_OP("vpermps", CHAINLET_PERM),
        CHAINLET_OP("vbroadcastss (memory)", CHAINLET_BROADCAST), CHAINLET_OP("vmovups (load)", CHAINLET_LOAD),
        CHAINLET_OP("vmovups (store)", CHAINLET_STORE),
    };
    const double fma64 = best_ns(CHAINLET_LOOP(CHAINLET_FMA64));
    const double cycle = fma64 / 64;  // ns of one FMA: the unit below
    std::printf("One FMA cycle: %.4f ns (%.2f GHz if the core does one 512-bit FMA a cycle)\n\n", cycle, 1 / cycle);
    std::printf("| operation (512-bit, float) | alone: FMA cycles per op | next to 64 FMAs: FMA cycles it takes |\n");
    std::printf("|---|---:|---:|\n");
    for (const Op& op : ops) {
        const double alone = best_ns(op.alone) / 8 / cycle;
        const double taken = (best_ns(op.beside_fmas) - fma64) / 8 / cycle;
        std::printf("| %s | %.2f | %.2f |\n", op.name, alone, std::max(taken, 0.0));
    }
    std::printf("\nAn operation with its own pipes takes about 0 next to the FMAs; one on the FMA pipes about its own\n"
                "cost. A store's cost next to FMAs is that of this loop: inside a register tile it was lower\n"
                "(docs/profile.md, 2026-11-30).\n");
}

#else

int main() {
    std::printf("chainlet_op_costs measures AVX-512 operations: this build (or CPU) has no AVX-512\n");
}

#endif
