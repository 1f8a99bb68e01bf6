// Command-line flags of the examples, parsed by CLI11 (Debian's libcli11-dev): `--name value` or
// `--name=value`, defaults shown by --help. A bad, unknown or repeated flag is one line on stderr,
// "<program>: error: <what> (see --help)", and exit status 2.
//
// Numbers are checked by the validators below rather than CLI11's Range, which lets "-1" wrap to
// 2^64 - 1 for an unsigned option, accepts "nan" as a real in any range and prints 1e-8 as 0.000000.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

namespace examples {

namespace detail {

inline std::string shortest(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

}  // namespace detail

// A whole number in [lo, hi], in decimal digits only (no sign, no 0x, nothing that overflows).
inline CLI::Validator whole(std::uint64_t lo, std::uint64_t hi) {
    const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    return CLI::Validator(
        [lo, hi, range](std::string& s) -> std::string {
            std::uint64_t v = 0;
            const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
            if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi)
                return "needs a whole number in " + range + ", got '" + s + "'";
            return {};
        },
        "in " + range);
}

// A finite number in [lo, hi].
inline CLI::Validator real(double lo, double hi) {
    const std::string range = "[" + detail::shortest(lo) + ", " + detail::shortest(hi) + "]";
    return CLI::Validator(
        [lo, hi, range](std::string& s) -> std::string {
            char* end = nullptr;
            const double v = s.empty() ? 0 : std::strtod(s.c_str(), &end);
            if (s.empty() || end != s.c_str() + s.size() || !(v >= lo && v <= hi))
                return "needs a number in " + range + ", got '" + s + "'";
            return {};
        },
        "in " + range);
}

// An App that shows every option's default in --help.
inline void show_defaults(CLI::App& app) { app.option_defaults()->always_capture_default(); }

// The one-line error of the examples; returns the exit status 2.
inline int fail(const CLI::App& app, std::string what) {
    for (char& c : what)
        if (c == '\n') c = ' ';
    std::fprintf(stderr, "%s: error: %s (see --help)\n", app.get_name().c_str(), what.c_str());
    return 2;
}

// Parses argv into app's options. Returns -1 to go on, else the status to exit with: 0 after --help
// (the help printed), 2 after a bad flag (one line on stderr). print = false: say nothing (MPI ranks
// other than 0).
inline int parse(CLI::App& app, int argc, char** argv, bool print = true) {
    try {
        app.parse(argc, argv);
        return -1;
    } catch (const CLI::Success&) {  // --help
        if (print) std::cout << app.help();
        return 0;
    } catch (const CLI::ParseError& e) {
        if (!print) return 2;
        return fail(app, e.what());
    }
}

}  // namespace examples
