// The MPI basics the other chainlet/mpi headers build on: starting and stopping MPI, the rank and
// size of a communicator, the MPI datatype of float and double, and the top-level error handler that
// turns an exception on any one rank into the end of the whole job (never a hang).
//
// Only the main thread calls MPI; OpenMP threads inside a rank only compute (MPI_THREAD_FUNNELED).
#pragma once

#include <mpi.h>

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace chainlet::mpi {

// Starts MPI (unless the program already did) and finalises it on destruction if it started it.
class Session {
public:
    Session(int& argc, char**& argv) {
        int started = 0;
        MPI_Initialized(&started);
        if (started) return;
        int provided = 0;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
        owner_ = true;
        if (provided < MPI_THREAD_FUNNELED)
            throw std::runtime_error("chainlet::mpi::Session: the MPI library provides thread level " +
                                     std::to_string(provided) + ", expected at least MPI_THREAD_FUNNELED");
    }
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
    ~Session() {
        int finished = 0;
        MPI_Finalized(&finished);
        if (owner_ && !finished) MPI_Finalize();
    }

private:
    bool owner_ = false;
};

inline int rank(MPI_Comm comm = MPI_COMM_WORLD) {
    int r = 0;
    MPI_Comm_rank(comm, &r);
    return r;
}

inline int size(MPI_Comm comm = MPI_COMM_WORLD) {
    int s = 1;
    MPI_Comm_size(comm, &s);
    return s;
}

template <class T>
MPI_Datatype datatype() {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "chainlet::mpi: float or double only");
    return std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
}

// Runs body() (which returns main's exit code) and returns its result. If it throws, prints
// "rank <r>: <message>" on standard error and calls MPI_Abort(comm, 1), which ends every rank of the
// job with a non-zero exit status: the other ranks may be waiting in a collective call that the failed
// rank will never join, so returning (or MPI_Finalize) could leave them hanging.
template <class F>
int run_or_abort(MPI_Comm comm, F&& body) {
    std::string what;
    try {
        return body();
    } catch (const std::exception& e) {
        what = e.what();
    } catch (...) {
        what = "unknown exception";
    }
    std::fprintf(stderr, "rank %d: %s\n", rank(comm), what.c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    MPI_Abort(comm, 1);
    return 1;  // not reached
}

}  // namespace chainlet::mpi
