// libFuzzer target: arbitrary bytes (raw or gzip IDX) into the IDX parser. Any input must either parse
// into dims whose product is the data size, or be rejected with IdxError naming the input; anything
// else (another exception, a crash, a sanitizer report, a huge allocation) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <span>
#include <string_view>

#include "chainlet/io/idx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::uint8_t> bytes(data, size);
    // Exercise both the rank check and the unchecked path.
    for (std::size_t rank : {std::size_t{0}, std::size_t{3}}) {
        try {
            const chainlet::IdxArray a = chainlet::parse_idx(bytes, "input", rank);
            const std::size_t total =
                std::accumulate(a.dims.begin(), a.dims.end(), std::size_t{1}, std::multiplies<>());
            if (a.dims.empty() || total != a.data.size() || (rank && a.dims.size() != rank)) std::abort();
        } catch (const chainlet::IdxError& e) {
            if (std::string_view(e.what()).substr(0, 7) != "input: ") std::abort();
        }
    }
    return 0;
}
