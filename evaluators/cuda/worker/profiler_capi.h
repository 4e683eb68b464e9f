/* kforge's CUPTI range profiler behind a C interface (libkforge_cupti.so), for processes that are not
 * kforge-worker: the Python program worker loads it with ctypes to collect the CUPTI metrics of a Python
 * call's kernels (Triton programs). No CUDA header is needed to use it.
 *
 * Contract: one profiler per process and device; calls come from the thread whose current CUDA context
 * is the device's (torch makes its primary context current once the device is initialised). Nothing
 * here throws or aborts: failures return NULL or nonzero with a sentence in `err`. */
#ifndef KFORGE_PROFILER_CAPI_H
#define KFORGE_PROFILER_CAPI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility: only these entry points are exported. */
#define KF_CUPTI_API __attribute__((visibility("default")))

typedef struct kf_cupti_profiler kf_cupti_profiler;
typedef void (*kf_cupti_callback)(void* user);

/* Opens the range profiler on the calling thread's current context, which must belong to device
 * `ordinal`. NULL on failure (no driver, no current context, profiling not permitted...), the reason
 * written to err (at most err_size bytes, NUL-terminated). */
KF_CUPTI_API kf_cupti_profiler* kf_cupti_open(int ordinal, char* err, size_t err_size);

/* The metrics (names separated by commas) of every kernel that launch(user) enqueues, up to max_ranges
 * kernels, each one range (auto ranges, kernel replay: CUPTI replays each kernel as often as the metric
 * set needs, restoring the memory it touches). prepare(user) runs before each pass outside the profiled
 * region. Returns a JSON text that the caller frees with kf_cupti_free:
 *   {"chip": "GH100", "passes": N, "dropped": D, "ranges": [{"name": kernel, "metrics": {name: value|null}}]}
 * or NULL with the reason in err. */
KF_CUPTI_API char* kf_cupti_profile(kf_cupti_profiler* p, const char* metrics, kf_cupti_callback prepare,
                                    kf_cupti_callback launch, void* user, size_t max_ranges, char* err,
                                    size_t err_size);

KF_CUPTI_API void kf_cupti_free(char* text);
KF_CUPTI_API void kf_cupti_close(kf_cupti_profiler* p);

#ifdef __cplusplus
}
#endif

#endif
