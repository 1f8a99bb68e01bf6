// safetensors: round trips in float and double, PyTorch's names, shapes and element layout (checked
// element by element against the layout formulas, written out independently here), float <-> double
// conversion on import, and a clear error for every kind of bad file. Also replays the fuzzer's seed
// corpus and regression inputs. The comparison with PyTorch itself is tests/pytorch_roundtrip.py.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../fuzz/fuzz_safetensors.cpp"
#include "chainlet/chainlet.hpp"
#include "chainlet/io/safetensors.hpp"
#include "files.hpp"

namespace test_safetensors {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;
using test::file_bytes;
namespace fs = std::filesystem;

namespace {

using SmallConv = fuzz_safetensors::Net;  // Conv2d=0, Tanh=1, MaxPool2d=2, Flatten=3, Linear=4
using Mlp = Chain<Input<3>, Dense<5, Tanh>, Dense<2>>;
using MlpWide = Chain<Input<3>, Dense<6, Tanh>, Dense<2>>;
using LeNet5 = Chain<Input<28, 28, 1>, Conv<5, 5, 6, ReLU>, MaxPool<2, 2>, Conv<5, 5, 16, ReLU>, MaxPool<2, 2>, Flatten,
                     Dense<120, ReLU>, Dense<84, ReLU>, Dense<10>>;

template <class Net, class T>
std::vector<T> counting_params() {
    std::vector<T> p(Net::num_params);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<T>(i);
    return p;
}


// A file with the given JSON header (padded to 8 bytes) and data bytes.
std::vector<std::byte> handmade(std::string header, std::size_t data_bytes) {
    header.append((8 - header.size() % 8) % 8, ' ');
    std::vector<std::byte> b(8 + header.size() + data_bytes);
    const std::uint64_t len = header.size();
    std::memcpy(b.data(), &len, 8);
    std::memcpy(b.data() + 8, header.data(), header.size());
    return b;
}

std::string error_of(const std::vector<std::byte>& bytes) {
    std::vector<double> p(Mlp::num_params);
    try {
        import_safetensors_bytes<Mlp>(bytes, "bad.safetensors", p);
    } catch (const SafetensorsError& e) {
        return e.what();
    }
    return "(no SafetensorsError)";
}

// Mlp's four tensors as a header, with one of them replaced by `replace` if given.
std::string mlp_header(const std::string& name = "", const std::string& replace = "") {
    const std::vector<std::pair<std::string, std::string>> t = {
        {"0.weight", R"({"dtype":"F64","shape":[5,3],"data_offsets":[0,120]})"},
        {"0.bias", R"({"dtype":"F64","shape":[5],"data_offsets":[120,160]})"},
        {"2.weight", R"({"dtype":"F64","shape":[2,5],"data_offsets":[160,240]})"},
        {"2.bias", R"({"dtype":"F64","shape":[2],"data_offsets":[240,256]})"}};
    std::string h = "{";
    for (const auto& [n, v] : t) {
        if (n == name && replace.empty()) continue;
        if (h.size() > 1) h += ",";
        h += "\"" + n + "\":" + (n == name ? replace : v);
    }
    return h + "}";
}

}  // namespace

TEMPLATE_TEST_CASE("safetensors: parameters round-trip bit for bit", "[safetensors]", float, double) {
    auto p = std::vector<TestType>(LeNet5::num_params);
    init_params<LeNet5>(p, 3);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] += static_cast<TestType>(0.001 * std::cos(static_cast<double>(i)));
    const auto path = (fs::temp_directory_path() / ("chainlet-st-" + std::to_string(::getpid()) + ".safetensors")).string();
    export_safetensors<LeNet5>(path, p);
    std::vector<TestType> q(LeNet5::num_params);
    import_safetensors<LeNet5>(path, q);
    REQUIRE(q == p);
    REQUIRE(file_bytes(path) == safetensors_bytes<LeNet5>(p));
    fs::remove(path);
}

TEST_CASE("safetensors: PyTorch's module indices, names and shapes", "[safetensors]") {
    const auto file = parse_safetensors(safetensors_bytes<LeNet5>(counting_params<LeNet5, float>()), "lenet5");
    std::vector<std::pair<std::string, std::vector<std::uint64_t>>> got;
    for (const auto& t : file.tensors) {
        got.emplace_back(t.name, t.shape);
        CHECK(t.dtype == "F32");
    }
    // Conv2d=0, ReLU=1, MaxPool2d=2, Conv2d=3, ReLU=4, MaxPool2d=5, Flatten=6, Linear=7, ReLU=8, Linear=9,
    // ReLU=10, Linear=11
    const std::vector<std::pair<std::string, std::vector<std::uint64_t>>> want = {
        {"0.weight", {6, 1, 5, 5}}, {"0.bias", {6}},  {"3.weight", {16, 6, 5, 5}}, {"3.bias", {16}},
        {"7.weight", {120, 256}},   {"7.bias", {120}}, {"9.weight", {84, 120}},    {"9.bias", {84}},
        {"11.weight", {10, 84}},    {"11.bias", {10}}};
    REQUIRE(got == want);
    REQUIRE(file.tensors.front().data.data() == file.bytes.data() + (file.bytes.size() - LeNet5::num_params * 4));
    bool described = false;
    for (const auto& [k, v] : file.metadata) described |= k == "chainlet.architecture" && v == architecture<LeNet5>::text();
    REQUIRE(described);
}

TEST_CASE("safetensors: elements are in PyTorch's layout (conv [out,in,kh,kw], Linear [out,in] on CHW)",
          "[safetensors]") {
    // SmallConv: Input 6x6x1, Conv 3x3 -> 4x4x2, MaxPool 2 -> 2x2x2, Flatten (8), Dense 3.
    const auto p = counting_params<SmallConv, double>();
    const auto file = parse_safetensors(safetensors_bytes<SmallConv>(p), "small");
    const auto conv_w = file.values<double>("0.weight"), conv_b = file.values<double>("0.bias");
    const auto dense_w = file.values<double>("4.weight"), dense_b = file.values<double>("4.bias");
    REQUIRE(file.tensors.size() == 4);
    const std::size_t OC = 2, K = 3, conv_weights = K * K * OC;
    for (std::size_t oc = 0; oc < OC; ++oc) {
        for (std::size_t ky = 0; ky < K; ++ky)
            for (std::size_t kx = 0; kx < K; ++kx)  // chainlet: W[((ky * KW + kx) * C + c) * OC + oc], C = 1
                REQUIRE(conv_w[(oc * K + ky) * K + kx] == p[(ky * K + kx) * OC + oc]);
        REQUIRE(conv_b[oc] == p[conv_weights + oc]);
    }
    const std::size_t dense_at = conv_weights + OC, H = 2, W = 2, C = 2, Out = 3;
    for (std::size_t o = 0; o < Out; ++o) {
        for (std::size_t c = 0; c < C; ++c)
            for (std::size_t y = 0; y < H; ++y)
                for (std::size_t x = 0; x < W; ++x)  // PyTorch flattens (c, y, x), chainlet (y, x, c)
                    REQUIRE(dense_w[o * 8 + (c * H + y) * W + x] == p[dense_at + ((y * W + x) * C + c) * Out + o]);
        REQUIRE(dense_b[o] == p[dense_at + 8 * Out + o]);
    }
}

TEST_CASE("safetensors: float files import into double chains and back", "[safetensors]") {
    std::vector<float> pf(SmallConv::num_params);
    init_params<SmallConv>(pf, 9);
    std::vector<double> pd(SmallConv::num_params);
    import_safetensors_bytes<SmallConv>(safetensors_bytes<SmallConv>(pf), "f32", pd);
    for (std::size_t i = 0; i < pf.size(); ++i) REQUIRE(pd[i] == static_cast<double>(pf[i]));
    std::vector<float> back(SmallConv::num_params);
    import_safetensors_bytes<SmallConv>(safetensors_bytes<SmallConv>(pd), "f64", back);
    REQUIRE(back == pf);
}

TEST_CASE("safetensors: a file of another architecture is a clear error", "[safetensors]") {
    const auto mlp = safetensors_bytes<Mlp>(counting_params<Mlp, double>());
    std::vector<double> wide(MlpWide::num_params, -1.0);
    REQUIRE_THROWS_WITH(import_safetensors_bytes<MlpWide>(mlp, "mlp.safetensors", wide),
                        Catch::StartsWith("mlp.safetensors: tensor \"0.weight\" has shape [5,3], expected [6,3]") &&
                            Catch::Contains("Dense[6,tanh]"));
    REQUIRE(wide == std::vector<double>(MlpWide::num_params, -1.0));  // untouched
    std::vector<double> conv(SmallConv::num_params);
    REQUIRE_THROWS_WITH(import_safetensors_bytes<SmallConv>(mlp, "mlp.safetensors", conv),
                        Catch::Contains("\"0.weight\" has shape [5,3], expected [2,1,3,3]"));
}

TEST_CASE("safetensors: bad files are clear errors", "[safetensors]") {
    CHECK(error_of(handmade(mlp_header(), 256)) == "(no SafetensorsError)");  // the baseline is valid
    CHECK_THAT(error_of(handmade(mlp_header("2.bias"), 256)),
               Catch::Contains("bad.safetensors: tensor \"2.bias\" [2] is missing"));
    CHECK_THAT(error_of(handmade(mlp_header("2.bias", R"({"dtype":"I64","shape":[2],"data_offsets":[240,256]})"), 256)),
               Catch::Contains("\"2.bias\" has dtype I64, expected F32 or F64"));
    CHECK_THAT(error_of(handmade(mlp_header("2.bias", R"({"dtype":"F64","shape":[2],"data_offsets":[240,264]})"), 256)),
               Catch::Contains("data_offsets [240, 264] out of range (the data section has 256 bytes)"));
    CHECK_THAT(error_of(handmade(mlp_header("2.bias", R"({"dtype":"F64","shape":[2],"data_offsets":[232,248]})"), 256)),
               Catch::Contains("overlap"));
    CHECK_THAT(error_of(handmade(mlp_header("2.bias", R"({"dtype":"F64","shape":[3],"data_offsets":[240,256]})"), 256)),
               Catch::Contains("16 data bytes, but F64 [3] needs 24"));
    CHECK_THAT(error_of(handmade(mlp_header("2.bias", R"({"dtype":"F64","shape":[-2],"data_offsets":[240,256]})"), 256)),
               Catch::Contains("must be a non-negative integer"));
    CHECK_THAT(error_of(handmade(mlp_header("2.bias", R"({"dtype":"F9","shape":[2],"data_offsets":[240,256]})"), 256)),
               Catch::Contains("unknown dtype \"F9\""));
    CHECK_THAT(error_of(handmade(mlp_header("2.bias", R"({"shape":[2],"data_offsets":[240,256]})"), 256)),
               Catch::Contains("no \"dtype\" string"));
    auto extra = mlp_header();
    extra.pop_back();
    extra += R"(,"5.weight":{"dtype":"F64","shape":[0],"data_offsets":[256,256]}})";
    CHECK_THAT(error_of(handmade(extra, 256)), Catch::Contains("unexpected tensor \"5.weight\""));
    CHECK_THAT(error_of(handmade(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},"a":1})", 8)),
               Catch::Contains("duplicate key \"a\""));
    CHECK_THAT(error_of(handmade(R"({"__metadata__":{"x":1}})", 0)), Catch::Contains("metadata \"x\" is not a string"));
    CHECK_THAT(error_of(handmade(std::string(100, '['), 0)), Catch::Contains("nested deeper than 64 levels"));
    for (const char* garbage : {"", "{", "{\"a\"", "{\"a\":}", "[1,2]", "{\"a\":tru}", "{\"\\uD800\":1}", "{}x",
                                "{\"a\":01}", "{\"a\":\"\x01\"}"})
        CHECK_THAT(error_of(handmade(garbage, 0)), Catch::StartsWith("bad.safetensors: ") &&
                                                       (Catch::Contains("JSON") || Catch::Contains("missing")));

    const auto good = handmade(mlp_header(), 256);
    for (std::size_t n = 0; n < good.size(); ++n) {
        INFO("length " << n);
        CHECK_THAT(error_of(std::vector<std::byte>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n))),
                   Catch::StartsWith("bad.safetensors: "));
    }
    auto huge = good;
    huge[7] = std::byte{0x7f};
    CHECK_THAT(error_of(huge), Catch::Contains("exceeds the limit"));
    REQUIRE_THROWS_AS(read_safetensors("/nonexistent/x.safetensors"), IoError);
}

TEST_CASE("safetensors: JSON errors name the byte or the key, the writer refuses repeated names", "[safetensors]") {
    CHECK_THAT(error_of(handmade(R"({"a":})", 0)), Catch::StartsWith("bad.safetensors: bad JSON header at byte 5: "));
    CHECK_THAT(error_of(handmade(R"({"a":1e400})", 0)),
               Catch::StartsWith("bad.safetensors: bad JSON header at byte 9: number overflow parsing '1e400'"));
    CHECK_THAT(error_of(handmade(R"({"__metadata__":{"x":"1","x":"2"}})", 0)), Catch::Contains("duplicate key \"x\""));
    CHECK_THAT(error_of(handmade(std::string(64, '[') + std::string(64, ']'), 0)),
               Catch::Contains("the JSON header is not an object"));  // 64 levels are allowed, 65 are not
    CHECK_THAT(error_of(handmade(std::string(65, '[') + std::string(65, ']'), 0)),
               Catch::Contains("nested deeper than 64 levels"));
    const std::vector<std::byte> bytes(8);
    const SafeTensor t{"w", "F64", {1}, bytes};
    REQUIRE_THROWS_WITH(encode_safetensors({t, t}, {}), Catch::Contains("tensor name \"w\" appears twice"));
    REQUIRE_THROWS_WITH(encode_safetensors({}, {{"k", "1"}, {"k", "2"}}), Catch::Contains("metadata key \"k\" appears twice"));
    REQUIRE_THROWS_WITH(encode_safetensors({SafeTensor{"__metadata__", "F64", {1}, bytes}}, {{"k", "1"}}),
                        Catch::Contains("\"__metadata__\" appears twice"));
    REQUIRE_THROWS_WITH(encode_safetensors({}, {{"k", "\xff"}}), Catch::Contains("not valid UTF-8"));
}

TEST_CASE("safetensors: the fuzzer's seeds import and its regression inputs are rejected cleanly",
          "[safetensors][fuzz]") {
    const fs::path root = CHAINLET_SOURCE_DIR;
    auto fuzz_one = [](const std::vector<std::byte>& bytes) {
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    };
    const std::size_t seeds = test::for_each_file(root / "fuzz/corpus/fuzz_safetensors", [&](const auto& bytes, const fs::path& path) {
        std::vector<double> p(SmallConv::num_params);
        INFO(path);
        REQUIRE_NOTHROW(import_safetensors_bytes<SmallConv>(bytes, path.string(), p));
        fuzz_one(bytes);
    });
    REQUIRE(seeds >= 2);
    test::for_each_file(root / "tests/data/fuzz/fuzz_safetensors", [&](const auto& bytes, const fs::path& path) {
        INFO(path);
        fuzz_one(bytes);
    });
}

}  // namespace test_safetensors
