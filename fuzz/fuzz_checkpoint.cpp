// libFuzzer target: arbitrary bytes fed to the checkpoint loader of a fixed small conv chain, with and
// without an optimiser. The bytes are tried twice: as given, and with their last four bytes replaced by
// the CRC-32 of the rest, so mutations get past the checksum and reach the checks behind it.
// Loading may fail only with chainlet::IoError; any other exception, crash or sanitizer report is a bug.
// Build and run: scripts/fuzz.sh fuzz_checkpoint 300 (see the fuzz convention in docs/checkpoints.md).
// tests/test_checkpoint.cpp includes this file to replay fuzz/corpus/ and tests/data/fuzz/ inputs.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/io/checkpoint.hpp"

namespace fuzz_checkpoint {

using Net = chainlet::Chain<chainlet::Input<6, 6, 1>, chainlet::Conv<3, 3, 2, chainlet::Tanh>, chainlet::MaxPool<2>,
                            chainlet::Flatten, chainlet::Dense<3>>;

inline void load_all(std::span<const std::byte> bytes) {
    std::vector<float> pf(Net::num_params);
    std::vector<double> pd(Net::num_params);
    chainlet::Adam<float> adam(0.01f);
    chainlet::SGD<double> sgd(0.1, 0.9);
    try { chainlet::load_checkpoint_bytes<Net>(bytes, "fuzz", pf); } catch (const chainlet::IoError&) {}
    try { chainlet::load_checkpoint_bytes<Net>(bytes, "fuzz", pf, adam); } catch (const chainlet::IoError&) {}
    try { chainlet::load_checkpoint_bytes<Net>(bytes, "fuzz", pd, sgd); } catch (const chainlet::IoError&) {}
}

}  // namespace fuzz_checkpoint

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto* b = reinterpret_cast<const std::byte*>(data);
    fuzz_checkpoint::load_all(std::span(b, size));
    if (size >= 4) {
        std::vector<std::byte> fixed(b, b + size);
        const auto crc = static_cast<std::uint32_t>(crc32(0L, data, static_cast<uInt>(size - 4)));
        std::memcpy(fixed.data() + size - 4, &crc, 4);
        fuzz_checkpoint::load_all(fixed);
    }
    return 0;
}
