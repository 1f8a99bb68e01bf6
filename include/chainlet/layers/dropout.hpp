// Dropout<Num, Den = 100>: in training, each value is zeroed with probability rate = Num / Den and the
// others are scaled by 1 / (1 - rate) (as PyTorch's nn.Dropout(rate) in train mode), so the expected
// output is the input; otherwise the identity. Any shape; no parameters. Dropout<10> drops 10 %,
// Dropout<1, 3> a third: the rate is a ratio of integers so that it is exact in the type and in the
// checkpoint text ("Dropout[10/100]").
//
// Training means a forward with Pass::training set: value_and_gradient and fit. Everything called for
// inference (predict, the pullback API's forward/pullback/vjp/jacobian) passes Pass{}, and Dropout is
// the identity there.
//
// The mask: value (sample s, feature f) of a chunk is kept when counter_hash(key, (S << 32) + f) >> 11
// >= rate * 2^53, with S = pass.first_sample + s its index in the batch and key derived from
// (pass.seed, pass.stream, pass.step) (random.hpp). No state: the same bits on any thread count and chunk
// size, and a run resumed at step t draws what the uninterrupted run drew at step t. The forward keeps
// the mask as its multipliers m (0 or 1 / (1 - rate); all 1 outside training) in saved storage.
//
// Pullback: dx = m * dy.
//
// The derivative passes (input derivatives, residual losses, Hessian-vector products) see the layer as
// inference does, the identity, also inside a training loop: their rules are jet.hpp's of a linear layer.
//
// PyTorch: nn.Dropout(Num / Den); one module index, feature order kept.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "chainlet/init.hpp"
#include "chainlet/jet.hpp"
#include "chainlet/layer.hpp"
#include "chainlet/layer_metadata.hpp"
#include "chainlet/random.hpp"
#include "chainlet/shape.hpp"

namespace chainlet {

template <std::intmax_t Num, std::intmax_t Den = 100>
struct Dropout {
    // (Den == 0 is refused by the bound layer's rejects_shape; the guard keeps that the only error.)
    static constexpr double rate = Den != 0 ? static_cast<double>(Num) / static_cast<double>(Den) : 0.0;
    // A 53-bit draw u is dropped when u < threshold = Num * 2^53 / Den (exact integer arithmetic).
    static constexpr std::uint64_t threshold =
        Den != 0 ? static_cast<std::uint64_t>((static_cast<uint128>(Num) << 53) / static_cast<uint128>(Den)) : 0;

    // The key of one step's draws for one Dropout layer (see Pass::stream).
    static std::uint64_t step_key(const Pass& pass) {
        return mix64(mix64(mix64(pass.seed ^ 0xD1B54A32D192ED03ull) ^ pass.stream) + pass.step);
    }
    // Whether value (sample, feature) is kept, sample being its index in the batch.
    static bool kept(std::uint64_t key, std::uint64_t sample, std::uint64_t feature) {
        return (counter_hash(key, (sample << 32) + feature) >> 11) >= threshold;
    }

    static constexpr bool rate_ok = Num >= 0 && Den > 0 && Num < Den;

    template <class InShape>
    struct bound {
        static constexpr bool rejects_shape = [] {
            static_assert(rate_ok, "Dropout<Num, Den>: the rate Num / Den must be in [0, 1)");
            static_assert(!rate_ok || InShape::size < (std::size_t(1) << 32), "Dropout: at most 2^32 features per sample");
            return !rate_ok || InShape::size >= (std::size_t(1) << 32);
        }();
        static constexpr std::size_t in_size = InShape::size;
        static constexpr std::size_t out_size = InShape::size;
        using out_shape = InShape;
        static constexpr std::size_t num_params = 0;
        static constexpr std::size_t saved_per_sample = in_size;  // the multipliers m
        static constexpr std::size_t scratch_per_sample = 0;
        // The derivative passes see the layer as inference does, the identity (jet.hpp's rules of a linear layer).
        using jet_rule = detail::LinearLayerJetRule<bound>;
        using hvp_rule = detail::LinearLayerHvpRule<bound>;

        template <class T>
        static void init(std::span<T>, Rng&, InitKind) {}

        template <class T>
        static void forward(const T*, const T* x, T* y, T* saved, std::size_t n, const Pass& pass) {
            if (!pass.training || Num == 0) {
                std::copy_n(x, in_size * n, y);
                std::fill_n(saved, in_size * n, T(1));
                return;
            }
            const T scale = static_cast<T>(static_cast<double>(Den) / static_cast<double>(Den - Num));
            const std::uint64_t key = step_key(pass);
            for (std::size_t f = 0; f < in_size; ++f)
                for (std::size_t s = 0; s < n; ++s) {
                    const std::size_t i = f * n + s;
                    const T m = kept(key, pass.first_sample + s, f) ? scale : T(0);
                    saved[i] = m;
                    y[i] = m * x[i];
                }
        }

        template <class T>
        static void pullback(const T*, T*, const T*, const T*, T* saved, T*, T* dy, T* dx, std::size_t n) {
            if (!dx) return;
            for (std::size_t i = 0; i < in_size * n; ++i) dx[i] = saved[i] * dy[i];
        }

        static std::string describe() { return "Dropout[" + std::to_string(Num) + "/" + std::to_string(Den) + "]"; }
        static void torch_layout(TorchModules& m, std::size_t) { m.skip_module(); }
    };
};

}  // namespace chainlet
