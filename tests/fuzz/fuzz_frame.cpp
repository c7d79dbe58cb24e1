// libFuzzer target: the frame reader on arbitrary bytes.
#include "core/io/frame_io.h"
#include "fuzz_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::runOnBytes(data, size, [](const std::string& p) { (void)spex::readFrame(p); });
}
