// One CPU-utilization sample of one thread. It lives in core because the CPU
// sampler (core) produces it and the doctor (above core) reads it: the type
// sits with the lower of the two, so no include points up the layer list.
#pragma once

#include <string>

namespace stoke {

// The fraction of one core a thread used over [t - interval, t] (seconds
// from the start of the run).
struct UtilizationSample {
  std::string thread;  // "device", "tokenizer-0", ...
  double t = 0;
  double fraction = 0;
};

}  // namespace stoke
