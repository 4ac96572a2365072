/* A stand-in for libnvidia-ml.so.1 with fixed, known readings, so the GPU
 * sampler is tested on machines without a GPU: test_gpu_sampler points
 * STOKE_NVML_LIBRARY at it. Built twice: as is, and with
 * FAKE_NVML_INIT_FAILS, where nvmlInit_v2 answers NVML_ERROR_DRIVER_NOT_LOADED.
 * Signatures follow nvml.h (the sampler declares the same ones).
 *
 * The readings are round in the units the sampler converts to: utilization
 * 75% (memory 40%), 2 GiB used of 8 GiB, 300000 mW = 300 W. The counters let
 * the test see that every sample reached NVML and that init is undone. */
#include <stdatomic.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct {
  unsigned int gpu, memory;
} fake_utilization;
typedef struct {
  unsigned long long total, free, used;
} fake_memory;

static int the_device; /* its address is the handle */
static atomic_int inits, shutdowns, utilization_calls;

EXPORT int nvmlInit_v2(void) {
#ifdef FAKE_NVML_INIT_FAILS
  return 12; /* NVML_ERROR_DRIVER_NOT_LOADED */
#else
  atomic_fetch_add(&inits, 1);
  return 0;
#endif
}

EXPORT int nvmlShutdown(void) {
  atomic_fetch_add(&shutdowns, 1);
  return 0;
}

EXPORT const char* nvmlErrorString(int rc) { return rc == 12 ? "Driver Not Loaded" : "Unknown Error"; }

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index != 0) return 2; /* NVML_ERROR_INVALID_ARGUMENT: one GPU here */
  *device = &the_device;
  return 0;
}

EXPORT int nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  if (device != &the_device || length < 16) return 2;
  strcpy(name, "Fake GPU 8GB");
  return 0;
}

EXPORT int nvmlDeviceGetUtilizationRates(void* device, fake_utilization* u) {
  if (device != &the_device) return 2;
  atomic_fetch_add(&utilization_calls, 1);
  u->gpu = 75;
  u->memory = 40;
  return 0;
}

EXPORT int nvmlDeviceGetMemoryInfo(void* device, fake_memory* m) {
  if (device != &the_device) return 2;
  m->total = 8ull << 30;
  m->used = 2ull << 30;
  m->free = m->total - m->used;
  return 0;
}

EXPORT int nvmlDeviceGetPowerUsage(void* device, unsigned int* milliwatts) {
  if (device != &the_device) return 2;
  *milliwatts = 300000;
  return 0;
}

/* Not NVML: read by the test through its own dlopen of this library. */
EXPORT int fake_nvml_inits(void) { return atomic_load(&inits); }
EXPORT int fake_nvml_shutdowns(void) { return atomic_load(&shutdowns); }
EXPORT int fake_nvml_utilization_calls(void) { return atomic_load(&utilization_calls); }
