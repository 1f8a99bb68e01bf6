// Checkpoints: bit-exact round trips in float and double (with Adam and SGD state, so training resumes
// exactly), clear errors for another architecture, element type or size, for every flipped byte and every
// truncation, and an atomic save that leaves the previous file intact when writing fails half-way.
// Also replays the fuzzer's seed corpus and regression inputs.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../fuzz/fuzz_checkpoint.cpp"
#include "chainlet/chainlet.hpp"
#include "chainlet/io/checkpoint.hpp"
#include "files.hpp"
#include "support.hpp"

namespace test_checkpoint {  // several test files make one program (tests/CMakeLists.txt)

using namespace chainlet;
namespace fs = std::filesystem;

namespace {

using Mlp = Chain<Input<3>, Dense<5, Tanh>, Dense<2>>;
using MlpRelu = Chain<Input<3>, Dense<5, ReLU>, Dense<2>>;  // same sizes, another activation
using MlpWide = Chain<Input<3>, Dense<6, Tanh>, Dense<2>>;
using SmallConv = fuzz_checkpoint::Net;

using test::file_bytes;
using test::TempDir;

template <class Net, class T>
std::vector<T> params(std::uint64_t seed) {
    std::vector<T> p(Net::num_params);
    init_params<Net>(p, seed);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] += static_cast<T>(0.01 * std::sin(static_cast<double>(i)));
    return p;
}

template <class Net, class T, class Opt>
void train_steps(std::vector<T>& p, Opt& opt, int steps) {
    const auto x = test::random_vector<T>(8 * Net::in_size, 11);
    const auto y = test::random_vector<T>(8 * Net::out_size, 12);
    FitOptions o;
    o.epochs = static_cast<std::size_t>(steps);
    o.batch = 8;
    o.threads = 1;
    fit<Net>(p, SquaredError{}, x, y, opt, o);
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const CheckpointError& e) {
        return e.what();
    }
    return "(no CheckpointError)";
}

}  // namespace

TEMPLATE_TEST_CASE("Checkpoint: parameters round-trip bit for bit", "[checkpoint]", float, double) {
    TempDir dir;
    const std::string path = dir.file("model.ckpt");
    const auto p = params<SmallConv, TestType>(1);
    save_checkpoint<SmallConv>(path, p);
    std::vector<TestType> q(SmallConv::num_params, TestType(-7));
    load_checkpoint<SmallConv>(path, q);
    REQUIRE(q == p);
    REQUIRE_FALSE(fs::exists(path + ".tmp-" + std::to_string(::getpid())));
    // The file is the in-memory encoding.
    REQUIRE(file_bytes(path) == checkpoint_bytes<SmallConv>(p));
}

TEMPLATE_TEST_CASE("Checkpoint: Adam and SGD state round-trip, so training resumes exactly", "[checkpoint]", float,
                   double) {
    TempDir dir;
    const std::string path = dir.file("train.ckpt");
    auto p = params<Mlp, TestType>(2);
    AdamW<TestType> adam(TestType(0.01), TestType(0.1));
    train_steps<Mlp>(p, adam, 3);
    save_checkpoint<Mlp>(path, p, adam);

    std::vector<TestType> q(Mlp::num_params);
    AdamW<TestType> adam2(TestType(0.01), TestType(0.1));
    load_checkpoint<Mlp>(path, q, adam2);
    REQUIRE(q == p);
    REQUIRE(adam2.steps() == 3);
    REQUIRE(std::ranges::equal(adam2.first_moment(), adam.first_moment()));
    REQUIRE(std::ranges::equal(adam2.second_moment(), adam.second_moment()));
    // fit() re-initialises the optimiser, so resume through step() directly.
    std::vector<TestType> g(Mlp::num_params);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<TestType>(std::cos(static_cast<double>(i)));
    adam.step(p, g);
    adam2.step(q, g);
    REQUIRE(q == p);

    SGD<TestType> sgd(TestType(0.05), TestType(0.9));
    train_steps<Mlp>(p, sgd, 2);
    save_checkpoint<Mlp>(path, p, sgd);
    const auto saved = p;
    SGD<TestType> sgd2(TestType(0.05), TestType(0.9));
    load_checkpoint<Mlp>(path, q, sgd2);
    REQUIRE(q == p);
    REQUIRE(std::ranges::equal(sgd2.velocity(), sgd.velocity()));
    sgd.step(p, g);
    sgd2.step(q, g);
    REQUIRE(q == p);

    // The file holds SGD state: asking for Adam state says what is there.
    REQUIRE_THAT(error_of([&] { load_checkpoint<Mlp>(path, q, adam2); }),
                 Catch::Contains("no Adam/AdamW optimiser state") && Catch::Contains("state for SGD"));
    // Parameters alone load from a file with optimiser state.
    std::vector<TestType> r(Mlp::num_params);
    load_checkpoint<Mlp>(path, r);
    REQUIRE(r == saved);
}

TEMPLATE_TEST_CASE("Checkpoint: fit stopped, saved, loaded and resumed with reset_optimizer = false gives the "
                   "bits of one uninterrupted run",
                   "[checkpoint][fit]", float, double) {
    TempDir dir;
    const std::string path = dir.file("resume.ckpt");
    const auto x = test::random_vector<TestType>(40 * Mlp::in_size, 21);
    const auto y = test::random_vector<TestType>(40 * Mlp::out_size, 22);
    // Full batch, so that epoch k of the resumed run is the same computation as epoch k of the whole run
    // (with shuffling, a new fit() call restarts the shuffle from FitOptions::seed).
    FitOptions o;
    o.batch = 0;
    o.threads = 1;
    o.epochs = 4;
    auto full_whole = params<Mlp, TestType>(4);
    Adam<TestType> adam_full(TestType(0.01));
    fit<Mlp>(full_whole, SquaredError{}, x, y, adam_full, o);

    auto first = params<Mlp, TestType>(4);
    Adam<TestType> adam_first(TestType(0.01));
    o.epochs = 2;
    fit<Mlp>(first, SquaredError{}, x, y, adam_first, o);
    save_checkpoint<Mlp>(path, first, adam_first);

    std::vector<TestType> resumed(Mlp::num_params);
    Adam<TestType> adam_resumed(TestType(0.01));
    load_checkpoint<Mlp>(path, resumed, adam_resumed);
    o.reset_optimizer = false;
    fit<Mlp>(resumed, SquaredError{}, x, y, adam_resumed, o);
    REQUIRE(adam_resumed.steps() == 4);
    REQUIRE(resumed == full_whole);

    // With the default (reset_optimizer = true) the moments restart from zero: a different result.
    std::vector<TestType> restarted(Mlp::num_params);
    Adam<TestType> adam_restarted(TestType(0.01));
    load_checkpoint<Mlp>(path, restarted, adam_restarted);
    o.reset_optimizer = true;
    fit<Mlp>(restarted, SquaredError{}, x, y, adam_restarted, o);
    REQUIRE(adam_restarted.steps() == 2);
    REQUIRE(restarted != full_whole);
}

TEST_CASE("Checkpoint: an optimiser that has not stepped yet is saved and restored as not started", "[checkpoint]") {
    const auto p = params<Mlp, double>(3);
    Adam<double> fresh(0.01);
    const auto bytes = checkpoint_bytes<Mlp>(p, fresh);
    Adam<double> used(0.01);
    std::vector<double> q(Mlp::num_params), g(Mlp::num_params, 1.0);
    used.step(q, g);
    load_checkpoint_bytes<Mlp>(bytes, "mem", q, used);
    REQUIRE(used.steps() == 0);
    REQUIRE(used.first_moment().empty());
}

TEST_CASE("Checkpoint: another architecture, element type or buffer size is a clear error", "[checkpoint]") {
    TempDir dir;
    const std::string path = dir.file("mlp.ckpt");
    const auto p = params<Mlp, float>(4);
    save_checkpoint<Mlp>(path, p);

    std::vector<float> relu(MlpRelu::num_params);
    STATIC_REQUIRE(MlpRelu::num_params == Mlp::num_params);
    const auto msg = error_of([&] { load_checkpoint<MlpRelu>(path, relu); });
    CHECK_THAT(msg, Catch::Contains(path) && Catch::Contains("architecture mismatch") &&
                        Catch::Contains("Input[3] Dense[5,relu] Dense[2,identity]") &&
                        Catch::Contains("Input[3] Dense[5,tanh] Dense[2,identity]"));
    REQUIRE(relu == std::vector<float>(MlpRelu::num_params, 0.0f));  // untouched

    std::vector<float> wide(MlpWide::num_params);
    CHECK_THAT(error_of([&] { load_checkpoint<MlpWide>(path, wide); }), Catch::Contains("Dense[6,tanh]"));

    std::vector<double> d(Mlp::num_params);
    CHECK_THAT(error_of([&] { load_checkpoint<Mlp>(path, d); }),
               Catch::Contains("element type mismatch: expected float64") && Catch::Contains("float32"));

    std::vector<float> short_buffer(Mlp::num_params - 1);
    REQUIRE_THROWS_WITH(load_checkpoint<Mlp>(path, short_buffer),
                        Catch::Contains("has " + std::to_string(Mlp::num_params - 1)) &&
                            Catch::Contains("expected " + std::to_string(Mlp::num_params)));
    REQUIRE_THROWS_AS(load_checkpoint<Mlp>(dir.file("missing.ckpt"), d), IoError);
    REQUIRE_THROWS_WITH(load_checkpoint<Mlp>(dir.file("missing.ckpt"), d), Catch::Contains("missing.ckpt: no such file"));
}

TEST_CASE("Checkpoint: every flipped byte and every truncation is detected", "[checkpoint]") {
    const auto p = params<Mlp, double>(5);
    AdamW<double> adam(0.01);
    auto q0 = p;
    train_steps<Mlp>(q0, adam, 1);
    const auto good = checkpoint_bytes<Mlp>(p, adam);
    const std::vector<double> sentinel(Mlp::num_params, 42.0);

    std::size_t checksum_errors = 0;
    for (std::size_t i = 0; i < good.size(); ++i) {
        auto bad = good;
        bad[i] ^= std::byte{0x10};
        auto q = sentinel;
        const auto msg = error_of([&] { load_checkpoint_bytes<Mlp>(bad, "flipped.ckpt", q, adam); });
        INFO("byte " << i << ": " << msg);
        REQUIRE_THAT(msg, Catch::StartsWith("flipped.ckpt: "));
        REQUIRE(q == sentinel);
        checksum_errors += msg.find("checksum mismatch") != std::string::npos;
    }
    // Flips in the magic, the version or a length are reported as such; every flip in the payload (the
    // architecture text, the section contents) is caught by the CRC.
    const std::size_t payload = good.size() - 8 - 4 - 4 - 8 - 8 - 4 - 4 - 2 * 16 - 4;
    REQUIRE(checksum_errors >= payload);

    for (std::size_t n = 0; n < good.size(); ++n) {
        const std::span<const std::byte> cut(good.data(), n);
        auto q = sentinel;
        const auto msg = error_of([&] { load_checkpoint_bytes<Mlp>(cut, "cut.ckpt", q); });
        INFO("length " << n << ": " << msg);
        REQUIRE_THAT(msg, Catch::StartsWith("cut.ckpt: ") &&
                              (Catch::Contains("truncated") || Catch::Contains("too short") ||
                               Catch::Contains("checksum mismatch")));
        REQUIRE(q == sentinel);
    }
    auto longer = good;
    longer.push_back(std::byte{0});
    std::vector<double> q(Mlp::num_params);
    REQUIRE_THAT(error_of([&] { load_checkpoint_bytes<Mlp>(longer, "long.ckpt", q); }),
                 Catch::Contains("1 unexpected bytes after the checksum"));
}

TEST_CASE("Checkpoint: a newer format version is refused by name", "[checkpoint]") {
    const auto p = params<Mlp, float>(6);
    auto bytes = checkpoint_bytes<Mlp>(p);
    bytes[8] = std::byte{2};  // the version field, then a valid CRC so only the version is wrong
    const auto crc = static_cast<std::uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size() - 4)));
    std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
    std::vector<float> q(Mlp::num_params);
    REQUIRE_THAT(error_of([&] { load_checkpoint_bytes<Mlp>(bytes, "v2.ckpt", q); }),
                 Catch::Contains("v2.ckpt: format version 2 is not supported"));
}

TEST_CASE("Checkpoint: sections of an unknown kind are skipped (room for later additions)", "[checkpoint]") {
    const auto p = params<Mlp, float>(9);
    const std::vector<std::byte> extra(13, std::byte{0xAB});
    const auto bytes = detail::encode_checkpoint(
        ElementType::f32, Mlp::num_params, architecture<Mlp>::text(),
        {{static_cast<detail::SectionKind>(99), extra}, {detail::SectionKind::params, std::as_bytes(std::span(p))}});
    std::vector<float> q(Mlp::num_params);
    load_checkpoint_bytes<Mlp>(bytes, "future.ckpt", q);
    REQUIRE(q == p);
}

TEST_CASE("Checkpoint: a save that fails half-way leaves the previous checkpoint intact", "[checkpoint]") {
    TempDir dir;
    const std::string path = dir.file("model.ckpt");
    const auto old_params = params<SmallConv, double>(7);
    save_checkpoint<SmallConv>(path, old_params);
    const auto old_bytes = file_bytes(path);
    const auto new_params = params<SmallConv, double>(8);
    REQUIRE(checkpoint_bytes<SmallConv>(new_params).size() > 200);

    // Make write() fail with EFBIG after 100 bytes of the new file (a full disk, say): RLIMIT_FSIZE
    // applies to every file this process writes, and SIGXFSZ is ignored so write() returns the error.
    struct rlimit saved {};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
    const auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = saved;
    small.rlim_cur = 100;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    std::string msg;
    try {
        save_checkpoint<SmallConv>(path, new_params);
    } catch (const IoError& e) {
        msg = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &saved);
    ::signal(SIGXFSZ, old_handler);

    INFO(msg);
    REQUIRE_THAT(msg, Catch::Contains(path) && Catch::Contains("cannot write") &&
                          Catch::Contains("the previous file, if any, is unchanged"));
    REQUIRE(file_bytes(path) == old_bytes);
    REQUIRE(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);  // no temporary left
    std::vector<double> q(SmallConv::num_params);
    load_checkpoint<SmallConv>(path, q);
    REQUIRE(q == old_params);

    // A directory that does not exist: nothing is created, the message names the file.
    REQUIRE_THROWS_WITH(save_checkpoint<SmallConv>(dir.file("no/such/dir/m.ckpt"), new_params),
                        Catch::Contains("no/such/dir/m.ckpt: cannot create the temporary file"));
    // And the save succeeds once writing works again.
    save_checkpoint<SmallConv>(path, new_params);
    load_checkpoint<SmallConv>(path, q);
    REQUIRE(q == new_params);
}

TEST_CASE("Checkpoint: the fuzzer's seeds load and its regression inputs are rejected cleanly", "[checkpoint][fuzz]") {
    const fs::path root = CHAINLET_SOURCE_DIR;
    auto fuzz_one = [](const std::vector<std::byte>& bytes) {
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    };
    const std::size_t seeds = test::for_each_file(root / "fuzz/corpus/fuzz_checkpoint", [&](const auto& bytes, const fs::path& path) {
        std::vector<float> pf(SmallConv::num_params);
        std::vector<double> pd(SmallConv::num_params);
        INFO(path);
        if (path.string().find("f64") != std::string::npos)
            REQUIRE_NOTHROW(load_checkpoint_bytes<SmallConv>(bytes, path.string(), pd));
        else
            REQUIRE_NOTHROW(load_checkpoint_bytes<SmallConv>(bytes, path.string(), pf));
        fuzz_one(bytes);
    });
    REQUIRE(seeds >= 2);
    test::for_each_file(root / "tests/data/fuzz/fuzz_checkpoint", [&](const auto& bytes, const fs::path& path) {
        INFO(path);
        fuzz_one(bytes);
    });
}

}  // namespace test_checkpoint
