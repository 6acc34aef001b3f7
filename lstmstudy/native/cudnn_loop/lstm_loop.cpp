// DeepBench's method on cuDNN 9 (see lstm_loop.h): the descriptors, weights and buffers are set up once, and a
// forward call is cudnnRNNForward alone, as rnn_bench.cu's cudnnRNN<T>::forward is cudnnRNNForwardInference alone.
#include "lstm_loop.h"

#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>
#include <vector>

#if CUDNN_MAJOR < 9
#error "the harness uses cuDNN 9's RNN API (cudnnSetRNNDescriptor_v8, cudnnRNNForward): cuDNN 9 or later is needed"
#endif

struct LstmLoop {
    int input_size = 0, hidden = 0, layers = 0, directions = 1, batch = 0, timesteps = 0;
    cudnnHandle_t handle = nullptr;
    cudnnDropoutDescriptor_t dropout = nullptr;
    cudnnRNNDescriptor_t rnn = nullptr;
    cudnnRNNDataDescriptor_t x_desc = nullptr, y_desc = nullptr;
    cudnnTensorDescriptor_t h_desc = nullptr, c_desc = nullptr;
    int32_t *seq_lengths = nullptr;  // on the device: cudnnRNNForward reads them asynchronously
    void *weights = nullptr, *work = nullptr, *reserve = nullptr;
    size_t weight_bytes = 0, work_bytes = 0, reserve_bytes = 0;
    float *x = nullptr, *y = nullptr, *hx = nullptr, *cx = nullptr, *hy = nullptr, *cy = nullptr;
};

namespace {

thread_local std::string last_error;

bool fail(const std::string &what, const std::string &why) {
    last_error = what + ": " + why;
    return false;
}

#define CUDA_OK(call)                                                                  \
    do {                                                                               \
        cudaError_t status_ = (call);                                                  \
        if (status_ != cudaSuccess) return fail(#call, cudaGetErrorString(status_));   \
    } while (0)

#define CUDNN_OK(call)                                                                 \
    do {                                                                               \
        cudnnStatus_t status_ = (call);                                                \
        if (status_ != CUDNN_STATUS_SUCCESS) return fail(#call, cudnnGetErrorString(status_)); \
    } while (0)

int64_t input_count(const LstmLoop &l) { return int64_t(l.batch) * l.timesteps * l.input_size; }
int64_t output_count(const LstmLoop &l) { return int64_t(l.batch) * l.timesteps * l.hidden * l.directions; }
int64_t state_count(const LstmLoop &l) { return int64_t(l.layers) * l.directions * l.batch * l.hidden; }

bool alloc(void **where, size_t bytes) {
    if (bytes == 0) {
        *where = nullptr;
        return true;
    }
    CUDA_OK(cudaMalloc(where, bytes));
    return true;
}

bool setup(LstmLoop &l) {
    CUDNN_OK(cudnnCreate(&l.handle));  // its stream is the default (legacy) stream, as the caller's timers use
    CUDNN_OK(cudnnCreateDropoutDescriptor(&l.dropout));
    CUDNN_OK(cudnnSetDropoutDescriptor(l.dropout, l.handle, 0.0f, nullptr, 0, 0));  // inference: no dropout
    CUDNN_OK(cudnnCreateRNNDescriptor(&l.rnn));
    // fp32 data and arithmetic, FMA math: no TF32 (CUDNN_DEFAULT_MATH permits it from the A100 on), as the study's
    // fp32 rows (PyTorch's "ieee" cuDNN RNN precision also sets CUDNN_FMA_MATH); PyTorch's layout: two biases
    // (b_ih, b_hh), a linear input GEMM (not DeepBench's CUDNN_SKIP_INPUT), no projection
    CUDNN_OK(cudnnSetRNNDescriptor_v8(l.rnn, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS,
                                      l.directions == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL,
                                      CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH,
                                      l.input_size, l.hidden, l.hidden, l.layers, l.dropout,
                                      CUDNN_RNN_PADDED_IO_DISABLED));

    std::vector<int> lengths(l.batch, l.timesteps);  // every sequence full length, as the study's input
    CUDNN_OK(cudnnCreateRNNDataDescriptor(&l.x_desc));
    CUDNN_OK(cudnnSetRNNDataDescriptor(l.x_desc, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED,
                                       l.timesteps, l.batch, l.input_size, lengths.data(), nullptr));
    CUDNN_OK(cudnnCreateRNNDataDescriptor(&l.y_desc));
    CUDNN_OK(cudnnSetRNNDataDescriptor(l.y_desc, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED,
                                       l.timesteps, l.batch, l.hidden * l.directions, lengths.data(), nullptr));

    const int dims[3] = {l.layers * l.directions, l.batch, l.hidden};
    const int strides[3] = {l.batch * l.hidden, l.hidden, 1};
    CUDNN_OK(cudnnCreateTensorDescriptor(&l.h_desc));
    CUDNN_OK(cudnnSetTensorNdDescriptor(l.h_desc, CUDNN_DATA_FLOAT, 3, dims, strides));
    CUDNN_OK(cudnnCreateTensorDescriptor(&l.c_desc));
    CUDNN_OK(cudnnSetTensorNdDescriptor(l.c_desc, CUDNN_DATA_FLOAT, 3, dims, strides));

    CUDNN_OK(cudnnGetRNNWeightSpaceSize(l.handle, l.rnn, &l.weight_bytes));
    CUDNN_OK(cudnnGetRNNTempSpaceSizes(l.handle, l.rnn, CUDNN_FWD_MODE_INFERENCE, l.x_desc, &l.work_bytes,
                                       &l.reserve_bytes));
    if (!alloc(&l.weights, l.weight_bytes) || !alloc(&l.work, l.work_bytes) || !alloc(&l.reserve, l.reserve_bytes))
        return false;
    CUDA_OK(cudaMemset(l.weights, 0, l.weight_bytes));

    CUDA_OK(cudaMalloc(reinterpret_cast<void **>(&l.seq_lengths), sizeof(int32_t) * l.batch));
    std::vector<int32_t> lengths32(l.batch, l.timesteps);
    CUDA_OK(cudaMemcpy(l.seq_lengths, lengths32.data(), sizeof(int32_t) * l.batch, cudaMemcpyHostToDevice));

    const size_t state_bytes = sizeof(float) * state_count(l);
    CUDA_OK(cudaMalloc(reinterpret_cast<void **>(&l.x), sizeof(float) * input_count(l)));
    CUDA_OK(cudaMalloc(reinterpret_cast<void **>(&l.y), sizeof(float) * output_count(l)));
    for (float **state : {&l.hx, &l.cx, &l.hy, &l.cy}) CUDA_OK(cudaMalloc(reinterpret_cast<void **>(state), state_bytes));
    CUDA_OK(cudaMemset(l.x, 0, sizeof(float) * input_count(l)));
    CUDA_OK(cudaMemset(l.hx, 0, state_bytes));  // a zero initial state, as the study's kernels start from
    CUDA_OK(cudaMemset(l.cx, 0, state_bytes));
    CUDA_OK(cudaDeviceSynchronize());
    return true;
}

// the element count a tensor descriptor cudnnGetRNNWeightParams filled describes (0 when it describes none)
bool described_count(cudnnTensorDescriptor_t desc, int64_t *count) {
    cudnnDataType_t type;
    int dims[8], strides[8], n = 0;
    CUDNN_OK(cudnnGetTensorNdDescriptor(desc, 8, &type, &n, dims, strides));
    int64_t total = n > 0 ? 1 : 0;
    for (int i = 0; i < n; ++i) total *= dims[i];
    *count = total;
    return true;
}

bool set_weights(LstmLoop &l, int pseudo_layer, int lin_id, const float *matrix, int64_t matrix_count,
                 const float *bias, int64_t bias_count) {
    if (pseudo_layer < 0 || pseudo_layer >= l.layers * l.directions || lin_id < 0 || lin_id > 7)
        return fail("lstm_loop_set_weights", "pseudo layer " + std::to_string(pseudo_layer) + " or linear layer " +
                                                 std::to_string(lin_id) + " out of range");
    cudnnTensorDescriptor_t m_desc = nullptr, b_desc = nullptr;
    CUDNN_OK(cudnnCreateTensorDescriptor(&m_desc));
    CUDNN_OK(cudnnCreateTensorDescriptor(&b_desc));
    void *m_addr = nullptr, *b_addr = nullptr;
    int64_t m_count = 0, b_count = 0;
    bool ok = true;
    cudnnStatus_t status = cudnnGetRNNWeightParams(l.handle, l.rnn, pseudo_layer, l.weight_bytes, l.weights, lin_id,
                                                   m_desc, &m_addr, b_desc, &b_addr);
    if (status != CUDNN_STATUS_SUCCESS) {
        ok = fail("cudnnGetRNNWeightParams", cudnnGetErrorString(status));
    } else if (!described_count(m_desc, &m_count) || !described_count(b_desc, &b_count)) {
        ok = false;
    } else if (m_count != matrix_count || b_count != bias_count || !m_addr || !b_addr) {
        ok = fail("lstm_loop_set_weights", "cuDNN's matrix " + std::to_string(pseudo_layer) + "/" +
                                               std::to_string(lin_id) + " holds " + std::to_string(m_count) +
                                               " and its bias " + std::to_string(b_count) + " values, given " +
                                               std::to_string(matrix_count) + " and " + std::to_string(bias_count));
    }
    cudnnDestroyTensorDescriptor(m_desc);
    cudnnDestroyTensorDescriptor(b_desc);
    if (!ok) return false;
    // PyTorch's flat cuDNN buffer views these regions as its (hidden x input) row-major weights: copied as they are
    CUDA_OK(cudaMemcpy(m_addr, matrix, sizeof(float) * matrix_count, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(b_addr, bias, sizeof(float) * bias_count, cudaMemcpyHostToDevice));
    return true;
}

bool forward(LstmLoop &l, int calls) {
    for (int i = 0; i < calls; ++i) {
        CUDNN_OK(cudnnRNNForward(l.handle, l.rnn, CUDNN_FWD_MODE_INFERENCE, l.seq_lengths, l.x_desc, l.x, l.y_desc,
                                 l.y, l.h_desc, l.hx, l.hy, l.c_desc, l.cx, l.cy, l.weight_bytes, l.weights,
                                 l.work_bytes, l.work, l.reserve_bytes, l.reserve));
    }
    return true;
}

void release(LstmLoop *l) {
    if (!l) return;
    for (void *p : {static_cast<void *>(l->seq_lengths), l->weights, l->work, l->reserve, static_cast<void *>(l->x),
                    static_cast<void *>(l->y), static_cast<void *>(l->hx), static_cast<void *>(l->cx),
                    static_cast<void *>(l->hy), static_cast<void *>(l->cy)})
        if (p) cudaFree(p);
    if (l->h_desc) cudnnDestroyTensorDescriptor(l->h_desc);
    if (l->c_desc) cudnnDestroyTensorDescriptor(l->c_desc);
    if (l->x_desc) cudnnDestroyRNNDataDescriptor(l->x_desc);
    if (l->y_desc) cudnnDestroyRNNDataDescriptor(l->y_desc);
    if (l->rnn) cudnnDestroyRNNDescriptor(l->rnn);
    if (l->dropout) cudnnDestroyDropoutDescriptor(l->dropout);
    if (l->handle) cudnnDestroy(l->handle);
    delete l;
}

}  // namespace

extern "C" {

const char *lstm_loop_error(void) { return last_error.c_str(); }

size_t lstm_loop_cudnn_version(void) { return cudnnGetVersion(); }

LstmLoop *lstm_loop_create(int input_size, int hidden, int layers, int bidirectional, int batch, int timesteps) {
    if (input_size < 1 || hidden < 1 || layers < 1 || batch < 1 || timesteps < 1) {
        fail("lstm_loop_create", "every size must be at least 1");
        return nullptr;
    }
    LstmLoop *loop = new LstmLoop;
    loop->input_size = input_size;
    loop->hidden = hidden;
    loop->layers = layers;
    loop->directions = bidirectional ? 2 : 1;
    loop->batch = batch;
    loop->timesteps = timesteps;
    if (!setup(*loop)) {
        std::string why = last_error;
        release(loop);
        last_error = why;
        return nullptr;
    }
    return loop;
}

void lstm_loop_destroy(LstmLoop *loop) { release(loop); }

int lstm_loop_set_weights(LstmLoop *loop, int pseudo_layer, int lin_id, const float *matrix, int64_t matrix_count,
                          const float *bias, int64_t bias_count) {
    return loop && set_weights(*loop, pseudo_layer, lin_id, matrix, matrix_count, bias, bias_count) ? 0 : -1;
}

int lstm_loop_set_input(LstmLoop *loop, const float *x, int64_t count) {
    if (!loop) return -1;
    if (count != input_count(*loop)) {
        fail("lstm_loop_set_input", "expected " + std::to_string(input_count(*loop)) + " values, given " +
                                        std::to_string(count));
        return -1;
    }
    cudaError_t status = cudaMemcpy(loop->x, x, sizeof(float) * count, cudaMemcpyHostToDevice);
    if (status != cudaSuccess) {
        fail("cudaMemcpy (input)", cudaGetErrorString(status));
        return -1;
    }
    return 0;
}

int lstm_loop_forward(LstmLoop *loop, int calls) { return loop && forward(*loop, calls) ? 0 : -1; }

int lstm_loop_sync(LstmLoop *loop) {
    cudaError_t status = cudaDeviceSynchronize();
    if (status != cudaSuccess) {
        fail("cudaDeviceSynchronize", cudaGetErrorString(status));
        return -1;
    }
    return loop ? 0 : -1;
}

int64_t lstm_loop_output_count(const LstmLoop *loop) { return loop ? output_count(*loop) : 0; }

int lstm_loop_output(LstmLoop *loop, float *y, int64_t count) {
    if (!loop || lstm_loop_sync(loop) != 0) return -1;
    if (count != output_count(*loop)) {
        fail("lstm_loop_output", "expected room for " + std::to_string(output_count(*loop)) + " values, given " +
                                     std::to_string(count));
        return -1;
    }
    cudaError_t status = cudaMemcpy(y, loop->y, sizeof(float) * count, cudaMemcpyDeviceToHost);
    if (status != cudaSuccess) {
        fail("cudaMemcpy (output)", cudaGetErrorString(status));
        return -1;
    }
    return 0;
}

int lstm_loop_sizes(const LstmLoop *loop, size_t *weight_bytes, size_t *work_bytes, size_t *reserve_bytes) {
    if (!loop) return -1;
    *weight_bytes = loop->weight_bytes;
    *work_bytes = loop->work_bytes;
    *reserve_bytes = loop->reserve_bytes;
    return 0;
}

}  // extern "C"
