// Minimal command-line flags for the examples: --name value pairs, each parsed and range-checked,
// with a usage message for anything unknown or malformed.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <string_view>

namespace examples {

class Args {
public:
    // switches: the names of flags that take no value (--name alone), read with flag().
    Args(int argc, char** argv, std::string usage, std::set<std::string> switches = {}) : usage_(std::move(usage)) {
        for (int i = 1; i < argc; ++i) {
            std::string_view a = argv[i];
            if (a == "-h" || a == "--help") {
                std::printf("%s", usage_.c_str());
                std::exit(0);
            }
            if (a.substr(0, 2) == "--" && switches.count(std::string(a.substr(2)))) {
                values_[std::string(a.substr(2))] = "";
                continue;
            }
            if (a.substr(0, 2) != "--" || i + 1 >= argc) fail("expected --flag value, got '" + std::string(a) + "'");
            values_[std::string(a.substr(2))] = argv[++i];
        }
    }
    // A whole number in [lo, hi]; the default if the flag is absent.
    std::uint64_t integer(const std::string& name, std::uint64_t def, std::uint64_t lo, std::uint64_t hi) {
        const auto it = take(name);
        if (!it) return def;
        std::uint64_t v = 0;
        const auto [p, ec] = std::from_chars(it->data(), it->data() + it->size(), v);
        if (ec != std::errc() || p != it->data() + it->size() || v < lo || v > hi)
            fail("--" + name + " needs a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                 "], got '" + *it + "'");
        return v;
    }
    double real(const std::string& name, double def, double lo, double hi) {
        const auto it = take(name);
        if (!it) return def;
        char* end = nullptr;
        const double v = std::strtod(it->c_str(), &end);
        if (end != it->c_str() + it->size() || !(v >= lo && v <= hi))
            fail("--" + name + " needs a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" +
                 *it + "'");
        return v;
    }
    // Whether the switch --name was given.
    bool flag(const std::string& name) { return take(name) != nullptr; }
    std::string text(const std::string& name, const std::string& def) {
        const auto it = take(name);
        return it ? *it : def;
    }
    // Call after reading every flag: rejects the ones nobody asked for.
    void finish() {
        if (!values_.empty()) fail("unknown flag --" + values_.begin()->first);
    }
    [[noreturn]] void fail(const std::string& why) {
        std::fprintf(stderr, "error: %s\n%s", why.c_str(), usage_.c_str());
        std::exit(2);
    }

private:
    const std::string* take(const std::string& name) {
        const auto it = values_.find(name);
        if (it == values_.end()) return nullptr;
        taken_[name] = it->second;
        values_.erase(it);
        return &taken_[name];
    }
    std::string usage_;
    std::map<std::string, std::string> values_, taken_;
};

}  // namespace examples
