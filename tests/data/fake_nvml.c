/* A stand-in for libnvidia-ml.so.1 with NVML's C interface, for machines without a GPU.
 * Devices, driver and CUDA versions come from environment variables so tests can drive every
 * branch of the launcher's checks:
 *   FAKE_NVML_INIT      NVML return code of nvmlInit_v2 (default 0 = success; 9 = DRIVER_NOT_LOADED)
 *   FAKE_NVML_COUNT     number of devices (default 1)
 *   FAKE_NVML_DRIVER    driver version string (default "550.54.15")
 *   FAKE_NVML_CUDA      CUDA version the driver supports, NVML encoding 1000*major+10*minor (default 12040)
 *   FAKE_NVML_NAME      device name (default "NVIDIA H100 80GB HBM3")
 *   FAKE_NVML_MEMORY_MIB  device memory (default 81559)
 *   FAKE_NVML_CC        compute capability "major.minor" (default "9.0")
 *   FAKE_NVML_BRAND     nvmlBrandType_t (default 14 = NVML_BRAND_NVIDIA, as data-center parts
 *                       since the A100 report; 5 = GEFORCE, 13 = NVIDIA_RTX)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct fake_device { unsigned int index; } *nvmlDevice_t;

static struct fake_device devices[64];
static int initialized = 0;

static const char *env_or(const char *name, const char *fallback) {
    const char *value = getenv(name);
    return value && *value ? value : fallback;
}

static nvmlReturn_t copy_string(const char *value, char *out, unsigned int length) {
    if (strlen(value) + 1 > length) return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
    strcpy(out, value);
    return 0;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 7: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case 12: return "Library Not Found";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlInit_v2(void) {
    int code = atoi(env_or("FAKE_NVML_INIT", "0"));
    if (code == 0) initialized = 1;
    return code;
}

nvmlReturn_t nvmlShutdown(void) { initialized = 0; return 0; }

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (!initialized) return 1;
    return copy_string(env_or("FAKE_NVML_DRIVER", "550.54.15"), version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cuda) {
    if (!initialized) return 1;
    if (!cuda) return 2;
    *cuda = atoi(env_or("FAKE_NVML_CUDA", "12040"));
    return 0;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!initialized) return 1;
    if (!count) return 2;
    *count = (unsigned int)atoi(env_or("FAKE_NVML_COUNT", "1"));
    return 0;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    unsigned int count = (unsigned int)atoi(env_or("FAKE_NVML_COUNT", "1"));
    if (!initialized) return 1;
    if (!device || index >= count || index >= 64) return 2;
    devices[index].index = index;
    *device = &devices[index];
    return 0;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    if (!initialized) return 1;
    if (!device) return 2;
    return copy_string(env_or("FAKE_NVML_NAME", "NVIDIA H100 80GB HBM3"), name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    char value[64];
    if (!initialized) return 1;
    if (!device) return 2;
    snprintf(value, sizeof value, "GPU-00000000-0000-0000-0000-%012u", device->index);
    return copy_string(value, uuid, length);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    if (!initialized) return 1;
    if (!device || !memory) return 2;
    memory->total = strtoull(env_or("FAKE_NVML_MEMORY_MIB", "81559"), NULL, 10) * 1048576ULL;
    memory->used = 0;
    memory->free = memory->total;
    return 0;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    if (!initialized) return 1;
    if (!device || !major || !minor) return 2;
    if (sscanf(env_or("FAKE_NVML_CC", "9.0"), "%d.%d", major, minor) != 2) return 2;
    return 0;
}

nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, int *brand) {
    if (!initialized) return 1;
    if (!device || !brand) return 2;
    *brand = atoi(env_or("FAKE_NVML_BRAND", "14"));
    return 0;
}
