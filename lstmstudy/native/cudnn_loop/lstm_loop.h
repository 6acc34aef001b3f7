/* DeepBench's method on cuDNN 9: one LSTM's inference forward (cudnnRNNForward, CUDNN_FWD_MODE_INFERENCE), fp32
 * with FMA math (no TF32), called from C++ in a loop with no sync between the calls, as DeepBench's rnn_bench.cu
 * times cudnnRNNForwardInference (gone in cuDNN 9). A C interface, so that Python loads it with ctypes
 * (lstmstudy.native) and a small executable (bench_main.cpp) runs it on its own.
 *
 * Every function returns 0 on success and -1 on an error, whose one-line message lstm_loop_error() returns. */
#ifndef LSTM_LOOP_H
#define LSTM_LOOP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct LstmLoop LstmLoop;

/* the last error of this thread, one line */
const char *lstm_loop_error(void);
/* the cuDNN version the library runs with (cudnnGetVersion), e.g. 91300 */
size_t lstm_loop_cudnn_version(void);

/* an LSTM of `layers` layers (bidirectional when `bidirectional` != 0) over a batch-first input of
 * batch x timesteps x input_size, hidden size `hidden`, on the current CUDA device; NULL on an error */
LstmLoop *lstm_loop_create(int input_size, int hidden, int layers, int bidirectional, int batch, int timesteps);
void lstm_loop_destroy(LstmLoop *loop);

/* one gate's weights in PyTorch's layout: `pseudo_layer` = layer * directions + direction; `lin_id` 0-3 are the
 * input matrices of gates i, f, g, o (rows of weight_ih, hidden x layer input, row-major) with b_ih's part, 4-7 the
 * recurrent ones (weight_hh, hidden x hidden) with b_hh's part; the counts are checked against cuDNN's */
int lstm_loop_set_weights(LstmLoop *loop, int pseudo_layer, int lin_id, const float *matrix, int64_t matrix_count,
                          const float *bias, int64_t bias_count);
/* the input, batch x timesteps x input_size floats, batch-first */
int lstm_loop_set_input(LstmLoop *loop, const float *x, int64_t count);
/* queue `calls` forward calls on the default stream, with no sync: DeepBench's loop */
int lstm_loop_forward(LstmLoop *loop, int calls);
/* wait for every queued call (cudaDeviceSynchronize) */
int lstm_loop_sync(LstmLoop *loop);
/* the output, batch x timesteps x (hidden x directions) floats, after a sync */
int64_t lstm_loop_output_count(const LstmLoop *loop);
int lstm_loop_output(LstmLoop *loop, float *y, int64_t count);
/* the sizes cuDNN asked for: weight space, work space, reserve space (bytes) */
int lstm_loop_sizes(const LstmLoop *loop, size_t *weight_bytes, size_t *work_bytes, size_t *reserve_bytes);

#ifdef __cplusplus
}
#endif

#endif
