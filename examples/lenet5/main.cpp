// LeNet5 (the SimpleChains.jl model) trained on Fashion-MNIST from Debian's dataset-fashion-mnist, or on
// any directory of MNIST-format IDX files (--data DIR, e.g. MNIST digits).
//
// After every epoch it prints `epoch=<k> seconds=<s> train_loss=<v> test_accuracy=<v>`, and at the end
// `checksum=<hex>` of the final parameters (same seed and thread count: same checksum). With
// --validation N the last N training images are held out: their accuracy ends each epoch's line, and
// --patience K stops after K epochs without a better one, keeping the best epoch's parameters.
//
// With --mpi (builds with CHAINLET_MPI), `mpirun -np P lenet5 --mpi` trains data-parallel: each rank
// computes 1/P of every batch of --batch samples (the same global batch as one process), rank 0
// prints, and rank 0 lists every rank's checksum (all equal) before the final `checksum=<hex>`.
//
// This file builds two programs: lenet5, which does not link MPI (Open MPI's libraries would add
// about 38 MB to the peak RSS of every run), and lenet5_mpi (CHAINLET_MPI defined). lenet5 --mpi
// replaces itself (execv) with the lenet5_mpi beside it, same arguments and environment, so
// `mpirun -np P lenet5 --mpi` works as before and a run without --mpi never loads MPI.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "chainlet/chainlet.hpp"
#include "chainlet/io/checkpoint.hpp"
#include "chainlet/checksum.hpp"
#include "chainlet/io/idx.hpp"
#include "common/args.hpp"
#include "common/progress.hpp"
#ifdef CHAINLET_MPI
#include "chainlet/mpi.hpp"
#endif

using namespace chainlet;
using LeNet5 = Chain<Input<28, 28, 1>, Conv<5, 5, 6, ReLU>, MaxPool<2, 2>, Conv<5, 5, 16, ReLU>, MaxPool<2, 2>, Flatten,
                     Dense<120, ReLU>, Dense<84, ReLU>, Dense<10>>;
static_assert(LeNet5::num_params == 44426);

namespace {

// The bytes as standardised inputs: (b / 255 - mean) / sd with the training set's mean and standard
// deviation, applied to both sets as each chunk is read.
ByteData standardised(const ImageDataset& d, const ImageDataset& train) {
    double s = 0, s2 = 0;
    for (std::uint8_t v : train.pixels) {
        s += v;
        s2 += static_cast<double>(v) * v;
    }
    const double n = static_cast<double>(train.pixels.size());
    const double mean = s / n, sd = std::sqrt(std::max(s2 / n - mean * mean, 1e-12));
    return ByteData{d.pixels, 1.0 / sd, -mean / sd};
}

double accuracy(const std::vector<float>& p, const ImageDataset& d, const ByteData& x, int threads) {
    std::vector<float> logits(d.count * 10);
    predict<LeNet5>(p, x, logits, threads);
    std::size_t right = 0;
    for (std::size_t s = 0; s < d.count; ++s) {
        const float* r = &logits[s * 10];
        right += static_cast<std::size_t>(std::max_element(r, r + 10) - r) == static_cast<std::size_t>(d.labels[s]);
    }
    return static_cast<double>(right) / static_cast<double>(d.count);
}

struct Options {
    std::string data = "/usr/share/datasets/fashion-mnist";
    std::uint64_t epochs = 10, batch = 64, seed = 1, limit = 0, test_limit = 0, validation = 0, patience = 0;
    double lr = 1e-3;
    int threads = 0;
    std::string save, resume;
    bool mpi = false;
};

int train_and_report(const Options& opts, bool use_mpi);

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"LeNet5 trained on Fashion-MNIST (Debian's dataset-fashion-mnist) or any directory of "
                 "MNIST-format IDX files, Adam with shuffled mini-batches.", "lenet5"};
    examples::show_defaults(app);
    Options o;
    app.add_option("--data", o.data, "directory of MNIST-format IDX files");
    app.add_option("--epochs", o.epochs, "passes over the training set")->check(examples::whole(1, 100000));
    app.add_option("--batch", o.batch, "samples per Adam step")->check(examples::whole(1, 1u << 24));
    app.add_option("--lr", o.lr, "Adam learning rate")->check(examples::real(1e-8, 10));
    app.add_option("--threads", o.threads, "OpenMP threads, 0 = all cores")->check(examples::whole(0, 1024));
    app.add_option("--seed", o.seed, "seed of the initial parameters and the shuffling")
        ->check(examples::whole(0, UINT64_MAX));
    app.add_option("--limit", o.limit, "use only the first N training images, 0 = all")
        ->check(examples::whole(0, UINT64_MAX));
    app.add_option("--test-limit", o.test_limit, "measure the test accuracy on the first N test images, 0 = all")
        ->check(examples::whole(0, UINT64_MAX));
    app.add_option("--validation", o.validation,
                   "hold out the last N training images as a validation set (accuracy after every epoch), 0 = none")
        ->check(examples::whole(0, UINT64_MAX));
    app.add_option("--patience", o.patience,
                   "stop when the validation accuracy has not improved for K epochs and keep the best epoch's "
                   "parameters (needs --validation), 0 = never")
        ->check(examples::whole(0, 100000));
    app.add_option("--save", o.save, "write a checkpoint (parameters + Adam state) to PATH after every epoch");
    app.add_option("--resume", o.resume, "start from the checkpoint PATH and train --epochs more epochs");
    app.add_flag("--mpi", o.mpi,
                 "data-parallel over the ranks of `mpirun -np P lenet5 --mpi` (use --threads 1 or OMP_NUM_THREADS "
                 "per rank); needs a build with CHAINLET_MPI");
    if (const int status = examples::parse(app, argc, argv); status >= 0) return status;
    if (o.patience > 0 && o.validation == 0) return examples::fail(app, "--patience needs --validation N");
    if (!o.mpi) return train_and_report(o, false);
#ifdef CHAINLET_MPI
    // Any error on any rank ends the whole job: an exception through run_or_abort, an error exit here.
    mpi::Session session(argc, argv);
    const int status = mpi::run_or_abort(MPI_COMM_WORLD, [&] { return train_and_report(o, true); });
    if (status != 0) {
        std::fprintf(stderr, "rank %d: exit status %d, ending the job\n", mpi::rank(), status);
        MPI_Abort(MPI_COMM_WORLD, status);
    }
    return 0;
#elif defined(CHAINLET_LENET5_MPI_PROGRAM)
    // The MPI build of this program lives beside this one: become it (the rank's environment set by
    // mpirun is inherited, so its MPI_Init joins the job as this process would have).
    char self[4096];
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    std::string path = len > 0 ? std::string(self, static_cast<std::size_t>(len)) : std::string(argv[0]);
    path = path.substr(0, path.find_last_of('/') + 1) + CHAINLET_LENET5_MPI_PROGRAM;
    execv(path.c_str(), argv);
    return examples::fail(app, "--mpi: cannot run " + path + " (" + std::strerror(errno) + "); build the lenet5_mpi target");
#else
    return examples::fail(app, "--mpi: this lenet5 was built without MPI (configure with -DCHAINLET_MPI=ON)");
#endif
}

namespace {

int train_and_report(const Options& opts, bool use_mpi) {
#ifdef CHAINLET_MPI
    const bool rank0 = !use_mpi || mpi::rank() == 0;
#else
    const bool rank0 = true;
    (void)use_mpi;
#endif
    const std::string& dir = opts.data;
    const std::uint64_t epochs = opts.epochs, batch = opts.batch, seed = opts.seed, limit = opts.limit;
    const double lr = opts.lr;
    const int threads = opts.threads;
    const std::string &save_path = opts.save, &resume_path = opts.resume;

    ImageDataset train, test;
    try {
        train = load_idx_dataset(dir, "train");
        test = load_idx_dataset(dir, "t10k");
    } catch (const std::exception& e) {  // IdxError, or e.g. std::bad_alloc: a message, not a crash
        std::fprintf(stderr, "error: %s\n", e.what());
        if (dir == "/usr/share/datasets/fashion-mnist")
            std::fprintf(stderr, "(install the data with: apt-get install dataset-fashion-mnist)\n");
        return 1;
    }
    for (const auto* d : {&train, &test})
        if (d->height != 28 || d->width != 28) {
            std::fprintf(stderr, "error: %s: images are %zux%zu, LeNet5 here takes 28x28\n", dir.c_str(), d->height,
                         d->width);
            return 1;
        }
    // --limit and --test-limit: the first N images of each set (the standardisation uses what is kept)
    for (auto [d, n] : {std::pair{&train, limit}, std::pair{&test, opts.test_limit}})
        if (n > 0 && n < d->count) {
            d->count = n;
            d->pixels.resize(n * 784);
            d->labels.resize(n);
        }
    // --validation: the last N training images become the validation set
    ImageDataset held_out;
    if (opts.validation > 0) {
        if (opts.validation >= train.count) {
            std::fprintf(stderr, "error: --validation %" PRIu64 " leaves no training images (%zu in all)\n",
                         opts.validation, train.count);
            return 1;
        }
        const std::size_t kept = train.count - opts.validation;
        held_out = {opts.validation, 28, 28, {train.pixels.begin() + kept * 784, train.pixels.end()},
                    {train.labels.begin() + kept, train.labels.end()}};
        train.count = kept;
        train.pixels.resize(kept * 784);
        train.labels.resize(kept);
    }
    const ByteData train_x = standardised(train, train), test_x = standardised(test, train),
                   val_x = standardised(held_out, train);
    if (rank0) {
        std::printf("%s\n", build_report().c_str());
        std::printf("data: %s (%zu training, %zu validation, %zu test images); LeNet5, %zu parameters; Adam(%g), batch %" PRIu64
                    ", %" PRIu64 " epochs\n",
                    dir.c_str(), train.count, held_out.count, test.count, LeNet5::num_params, lr, batch, epochs);
#ifdef CHAINLET_MPI
        if (use_mpi)
            std::printf("mpi: data-parallel over %d ranks, about %" PRIu64 " samples of each batch per rank\n",
                        mpi::size(), batch / static_cast<std::uint64_t>(mpi::size()));
#endif
        std::fflush(stdout);
    }

    std::vector<float> p(LeNet5::num_params);
    init_params<LeNet5>(p, seed);
    Adam opt(static_cast<float>(lr));
    std::uint64_t shuffle_seed = seed;
    if (!resume_path.empty()) {  // every rank loads the same file, so all start alike
        try {
            load_checkpoint<LeNet5>(resume_path, p, opt);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "error: %s\n", e.what());
            return 1;
        }
        // A new fit() restarts the shuffle from its seed: offset it by the steps already taken so the
        // resumed epochs do not repeat the first epochs' order.
        shuffle_seed = seed + opt.steps();
        if (rank0) std::printf("resumed from %s after %zu Adam steps\n", resume_path.c_str(), opt.steps());
    }
    examples::Progress bar;
    FitOptions o;
    o.epochs = epochs;
    o.batch = batch;
    o.seed = shuffle_seed;
    o.threads = threads;
    o.reset_optimizer = resume_path.empty();
    o.on_step = [&](const StepInfo& s) { bar.update(s.epoch, s.step, s.steps_per_epoch, s.loss); };
    if (held_out.count > 0) {
        o.validation = validation_set<LeNet5>(p, val_x, held_out.labels, Accuracy{}, threads);
        o.patience = opts.patience;
    }
    o.on_epoch = [&](const EpochInfo& e) {
        bar.finish();
        std::printf("epoch=%zu seconds=%.3f train_loss=%.5f test_accuracy=%.4f", e.epoch, e.seconds, e.loss,
                    accuracy(p, test, test_x, threads));
        if (held_out.count > 0) std::printf(" val_accuracy=%.4f%s", e.validation, e.best ? " (best)" : "");
        std::printf("\n");
        // on_epoch runs on rank 0 only under --mpi, so one process writes the file (atomically).
        if (!save_path.empty()) {
            save_checkpoint<LeNet5>(save_path, p, opt);
            std::printf("saved %s\n", save_path.c_str());
        }
        std::fflush(stdout);
    };
    FitResult result;
    try {
#ifdef CHAINLET_MPI
        if (use_mpi) result = mpi::fit<LeNet5>(MPI_COMM_WORLD, p, SoftmaxCrossEntropy{}, train_x, train.labels, opt, o);
        else
#endif
            result = fit<LeNet5>(p, SoftmaxCrossEntropy{}, train_x, train.labels, opt, o);
    } catch (const std::exception& e) {
        bar.finish();
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
#ifdef CHAINLET_MPI
    if (use_mpi) {  // every rank's checksum, printed by rank 0 (mpi::fit has checked that they agree)
        const auto sums = mpi::checksums<float>(MPI_COMM_WORLD, p);
        for (std::size_t r = 0; rank0 && r < sums.size(); ++r) std::printf("rank=%zu checksum=%016" PRIx64 "\n", r, sums[r]);
    }
#endif
    if (rank0 && held_out.count > 0) {
        std::printf("best epoch %zu: val_accuracy=%.4f test_accuracy=%.4f%s\n", result.best_epoch, result.best_validation,
                    accuracy(p, test, test_x, threads), result.stopped_early ? " (stopped early)" : "");
        // p now holds the best epoch's parameters (the optimiser's state is the last step's)
        if (!save_path.empty() && result.best_epoch != result.epochs) {
            save_checkpoint<LeNet5>(save_path, p, opt);
            std::printf("saved %s (the best epoch's parameters)\n", save_path.c_str());
        }
    }
    if (rank0) std::printf("checksum=%016" PRIx64 "\n", checksum(std::span<const float>(p)));
    return 0;
}

}  // namespace
