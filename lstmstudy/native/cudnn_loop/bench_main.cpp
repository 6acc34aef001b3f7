// The harness on its own, DeepBench's way (rnn_bench.cu's time_rnn): one warm-up call, then rounds of N forward
// calls queued between two cudaDeviceSynchronize, each round's time divided by N; printed as one line of JSON.
//
//   lstm_loop_bench HIDDEN BATCH TIMESTEPS [CALLS=100] [ROUNDS=10] [WARMUP=3] [INPUT=HIDDEN]
//
// Each round is timed twice: on the host clock between the two syncs (DeepBench's), and with CUDA events recorded
// around the queue on the same stream (the device's timeline from the first call's start to the last one's end).
// Weights and input are uniform random from a fixed seed; lstmstudy loads its own weights through the library.
#include "lstm_loop.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

uint64_t state = 0x9E3779B97F4A7C15ull;

float uniform(float bound) {  // xorshift64*: reproducible without <random>'s distributions differing by library
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    const double unit = double((state * 0x2545F4914F6CDD1Dull) >> 11) / double(1ull << 53);
    return float((2.0 * unit - 1.0) * bound);
}

int die(const char *what) {
    std::fprintf(stderr, "lstm_loop_bench: %s: %s\n", what, lstm_loop_error());
    return 1;
}

int arg(int argc, char **argv, int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; }

std::string number(double value) {  // every significant digit a float of seconds needs
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", value);
    return text;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s HIDDEN BATCH TIMESTEPS [CALLS=100] [ROUNDS=10] [WARMUP=3] [INPUT=HIDDEN]\n",
                     argv[0]);
        return 2;
    }
    const int hidden = arg(argc, argv, 1, 0), batch = arg(argc, argv, 2, 0), timesteps = arg(argc, argv, 3, 0);
    const int calls = arg(argc, argv, 4, 100), rounds = arg(argc, argv, 5, 10), warmup = arg(argc, argv, 6, 3);
    const int input = arg(argc, argv, 7, hidden);
    if (calls < 1 || rounds < 1 || warmup < 0) {
        std::fprintf(stderr, "lstm_loop_bench: CALLS and ROUNDS must be at least 1, WARMUP at least 0\n");
        return 2;
    }
    LstmLoop *loop = lstm_loop_create(input, hidden, 1, 0, batch, timesteps);
    if (!loop) return die("create");
    const float bound = 1.0f / std::sqrt(float(hidden));
    for (int lin = 0; lin < 8; ++lin) {
        const int64_t columns = lin < 4 ? input : hidden;
        std::vector<float> matrix(size_t(hidden) * columns), bias(hidden);
        for (float &v : matrix) v = uniform(bound);
        for (float &v : bias) v = uniform(bound);
        if (lstm_loop_set_weights(loop, 0, lin, matrix.data(), int64_t(matrix.size()), bias.data(), hidden) != 0)
            return die("weights");
    }
    std::vector<float> x(size_t(batch) * timesteps * input);
    for (float &v : x) v = uniform(1.0f);
    if (lstm_loop_set_input(loop, x.data(), int64_t(x.size())) != 0) return die("input");

    if (lstm_loop_forward(loop, warmup) != 0 || lstm_loop_sync(loop) != 0) return die("warm-up");
    cudaEvent_t begin, end;
    if (cudaEventCreate(&begin) != cudaSuccess || cudaEventCreate(&end) != cudaSuccess) {
        std::fprintf(stderr, "lstm_loop_bench: cudaEventCreate failed\n");
        return 1;
    }
    std::vector<double> host, device;
    for (int r = 0; r < rounds; ++r) {
        if (lstm_loop_sync(loop) != 0) return die("sync");
        const auto start = std::chrono::steady_clock::now();
        cudaEventRecord(begin, 0);
        if (lstm_loop_forward(loop, calls) != 0) return die("forward");
        cudaEventRecord(end, 0);
        if (lstm_loop_sync(loop) != 0) return die("sync");
        const auto stop = std::chrono::steady_clock::now();
        float ms = 0.0f;
        cudaEventElapsedTime(&ms, begin, end);
        host.push_back(std::chrono::duration<double>(stop - start).count() / calls);
        device.push_back(ms * 1e-3 / calls);
    }
    size_t weight_bytes = 0, work_bytes = 0, reserve_bytes = 0;
    lstm_loop_sizes(loop, &weight_bytes, &work_bytes, &reserve_bytes);
    std::string out = "{\"hidden\":" + std::to_string(hidden) + ",\"batch\":" + std::to_string(batch) +
                      ",\"timesteps\":" + std::to_string(timesteps) + ",\"input\":" + std::to_string(input) +
                      ",\"calls\":" + std::to_string(calls) + ",\"warmup\":" + std::to_string(warmup) +
                      ",\"cudnn_version\":" + std::to_string(lstm_loop_cudnn_version()) +
                      ",\"math\":\"CUDNN_FMA_MATH\",\"work_bytes\":" + std::to_string(work_bytes) +
                      ",\"samples_s\":[";
    for (size_t i = 0; i < host.size(); ++i) out += (i ? "," : "") + number(host[i]);
    out += "],\"event_samples_s\":[";
    for (size_t i = 0; i < device.size(); ++i) out += (i ? "," : "") + number(device[i]);
    out += "]}";
    std::printf("%s\n", out.c_str());
    cudaEventDestroy(begin);
    cudaEventDestroy(end);
    lstm_loop_destroy(loop);
    return 0;
}
