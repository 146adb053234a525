// A stand-in for the driver's libnvidia-ml.so.1, loaded by tests through nvml_library like the
// real one: it exports the NVML functions kiln binds and answers from a script of readings the
// test sets with kiln_fake_nvml_script. Each SM clock query takes the next row, and once the
// script is used up the SM clock query fails, so a sampler takes exactly one reading per row
// (its poll ends at the first unreadable reading) and its summary is known in advance.

#include <atomic>
#include <mutex>
#include <vector>

extern "C" {

struct kiln_fake_nvml_row {
  unsigned sm_mhz;
  unsigned mem_mhz;
  unsigned temperature_c;
  unsigned power_mw;
  unsigned long long throttle;
};

struct kiln_fake_device;
}

namespace {

std::mutex mu;
std::vector<kiln_fake_nvml_row> script;
size_t next = 0;
kiln_fake_nvml_row current{};
std::atomic<int> reads{0};
char dummy_device;

} // namespace

extern "C" {

void kiln_fake_nvml_script(const kiln_fake_nvml_row* rows, int n) {
  std::lock_guard<std::mutex> lock{mu};
  script.assign(rows, rows + n);
  next = 0;
  reads = 0;
}

int kiln_fake_nvml_reads() {
  return reads.load();
}

int nvmlInit_v2() {
  return 0;
}

const char* nvmlErrorString(int) {
  return "fake NVML: script used up";
}

int nvmlDeviceGetHandleByPciBusId_v2(const char*, kiln_fake_device** dev) {
  *dev = reinterpret_cast<kiln_fake_device*>(&dummy_device);
  return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned, kiln_fake_device** dev) {
  *dev = reinterpret_cast<kiln_fake_device*>(&dummy_device);
  return 0;
}

int nvmlDeviceGetClockInfo(kiln_fake_device*, int type, unsigned* v) {
  std::lock_guard<std::mutex> lock{mu};
  if (type == 1) { // NVML_CLOCK_SM: the start of a reading
    if (next >= script.size())
      return 999; // NVML_ERROR_UNKNOWN
    current = script[next++];
    ++reads;
    *v = current.sm_mhz;
    return 0;
  }
  *v = current.mem_mhz;
  return 0;
}

int nvmlDeviceGetMaxClockInfo(kiln_fake_device*, int type, unsigned* v) {
  *v = type == 1 ? 1980 : 3201;
  return 0;
}

int nvmlDeviceGetTemperature(kiln_fake_device*, int, unsigned* v) {
  std::lock_guard<std::mutex> lock{mu};
  *v = current.temperature_c;
  return 0;
}

int nvmlDeviceGetPowerUsage(kiln_fake_device*, unsigned* v) {
  std::lock_guard<std::mutex> lock{mu};
  *v = current.power_mw;
  return 0;
}

int nvmlDeviceGetCurrentClocksEventReasons(kiln_fake_device*, unsigned long long* v) {
  std::lock_guard<std::mutex> lock{mu};
  *v = current.throttle;
  return 0;
}

} // extern "C"
