// libFuzzer target: arbitrary bytes fed to the safetensors parser and to the importer of a fixed small
// conv chain (float and double). Failing is allowed only as chainlet::IoError; any other exception,
// crash or sanitizer report is a bug. tests/test_safetensors.cpp includes this file to replay
// fuzz/corpus/ and tests/data/fuzz/ inputs.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/io/safetensors.hpp"

namespace fuzz_safetensors {

using Net = chainlet::Chain<chainlet::Input<6, 6, 1>, chainlet::Conv<3, 3, 2, chainlet::Tanh>, chainlet::MaxPool<2>,
                            chainlet::Flatten, chainlet::Dense<3>>;

inline void load_all(std::span<const std::byte> bytes) {
    std::vector<float> pf(Net::num_params);
    std::vector<double> pd(Net::num_params);
    try { chainlet::import_safetensors_bytes<Net>(bytes, "fuzz", pf); } catch (const chainlet::IoError&) {}
    try { chainlet::import_safetensors_bytes<Net>(bytes, "fuzz", pd); } catch (const chainlet::IoError&) {}
}

}  // namespace fuzz_safetensors

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz_safetensors::load_all(std::span(reinterpret_cast<const std::byte*>(data), size));
    return 0;
}
