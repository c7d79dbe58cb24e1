// NVTX injection library for tests: NVTX3 loads it from NVTX_INJECTION64_PATH on the
// first NVTX call and calls InitializeInjectionNvtx2, where we replace the core
// module's RangePushA/RangePop entries with recorders.
#include <nvtx3/nvToolsExt.h>

#include <mutex>
#include <string>
#include <vector>

namespace {
std::mutex g_mutex;
std::vector<std::string> g_pushed;
long g_pops = 0;

int NVTX_API recordPushA(const char* message) {
  std::lock_guard lock(g_mutex);
  g_pushed.emplace_back(message ? message : "");
  return 0;
}
int NVTX_API recordPop() {
  std::lock_guard lock(g_mutex);
  ++g_pops;
  return 0;
}
} // namespace

extern "C" {

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  if (!callbacks) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || !table) return 0;
  if (size <= NVTX_CBID_CORE_RangePop) return 0;
  *table[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&recordPushA);
  *table[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&recordPop);
  return 1;
}

// Read back by the test through dlsym: the pushed names, newline-separated.
__attribute__((visibility("default"))) const char* spexNvtxRecorded(long* pops) {
  static std::string joined;
  std::lock_guard lock(g_mutex);
  joined.clear();
  for (const auto& s : g_pushed) joined += s + "\n";
  if (pops) *pops = g_pops;
  return joined.c_str();
}
}
