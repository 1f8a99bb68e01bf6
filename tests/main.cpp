#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

// Every test case is tagged with its file's name ([#test_conv], Catch's --filenames-as-tags): several
// test files make one program (tests/CMakeLists.txt), and ctest selects each file's cases by that tag.
int main(int argc, char* argv[]) {
    Catch::Session session;
    session.configData().filenamesAsTags = true;
    if (const int status = session.applyCommandLine(argc, argv); status != 0) return status;
    return session.run();
}
