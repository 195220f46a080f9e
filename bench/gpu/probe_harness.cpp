// gpu_probe's harness (bench/gpu/probe_harness.hpp).
#include "probe_harness.hpp"

namespace dcalign::gpu_probe {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuBLAS status " +
                             std::to_string(static_cast<int>(s)));
}
void check(cusolverStatus_t s, const char* what) {
  if (s != CUSOLVER_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuSOLVER status " +
                             std::to_string(static_cast<int>(s)));
}

/// Repetitions, median, min and max of times in ms (both kinds of case report these).
json summary_ms(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  const size_t m = ms.size();
  json j;
  j["repetitions"] = m;
  j["median_ms"] = m % 2 ? ms[m / 2] : 0.5 * (ms[m / 2 - 1] + ms[m / 2]);
  j["min_ms"] = ms.front();
  j["max_ms"] = ms.back();
  return j;
}

/// Times `run` (which queues work on `stream`) with CUDA events: up to `warmup` untimed runs,
/// then up to cfg.repetitions timed ones (at least one) while the case is under its cap. Median,
/// min and max in ms.
json time_case(const Config& cfg, cudaStream_t stream, const std::function<void()>& run) {
  cudaEvent_t start, stop;
  PROBE(cudaEventCreate(&start));
  PROBE(cudaEventCreate(&stop));
  std::vector<double> ms;
  const double t0 = now_seconds();
  try {
    for (int i = 0; i < cfg.warmup; ++i) {  // the cap bounds warm-up runs too, but one runs
      if (i > 0 && now_seconds() - t0 > cfg.max_seconds_per_case) break;
      run();
    }
    PROBE(cudaStreamSynchronize(stream));
    for (int i = 0; i < cfg.repetitions; ++i) {
      if (i > 0 && now_seconds() - t0 > cfg.max_seconds_per_case) break;
      PROBE(cudaEventRecord(start, stream));
      run();
      PROBE(cudaEventRecord(stop, stream));
      PROBE(cudaEventSynchronize(stop));
      float e = 0;
      PROBE(cudaEventElapsedTime(&e, start, stop));
      ms.push_back(e);
    }
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return summary_ms(std::move(ms));
}

/// Host seconds of `f`, median of up to cfg.repetitions runs under the case cap.
json time_host(const Config& cfg, const std::function<void()>& f) {
  std::vector<double> t;
  const double t0 = now_seconds();
  for (int i = 0; i < cfg.repetitions; ++i) {
    if (i > 0 && now_seconds() - t0 > cfg.max_seconds_per_case) break;
    const double s = now_seconds();
    f();
    t.push_back(1e3 * (now_seconds() - s));
  }
  return summary_ms(std::move(t));
}

/// The whole of `text` as an integer in 1..hi, or an error naming the option.
int parse_count(const std::string& text, const char* option, int hi) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || v < 1 || v > hi)
    throw std::invalid_argument(std::string(option) + ": '" + text + "' is not an integer in 1.." +
                                std::to_string(hi));
  return static_cast<int>(v);
}

/// "950x50,500x50" -> {(950, 50), (500, 50)} with the separator `sep`; "" -> none. Sizes are
/// bounded by 16384, counts by 100000.
std::vector<std::pair<int, int>> parse_pairs(const std::string& spec, char sep,
                                             const char* option) {
  std::vector<std::pair<int, int>> out;
  std::istringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const auto at = item.find(sep);
    if (at == std::string::npos)
      throw std::invalid_argument(std::string(option) + ": '" + item + "' is not two integers " +
                                  "joined by '" + sep + "'");
    try {
      out.emplace_back(parse_count(item.substr(0, at), "size", 16384),
                       parse_count(item.substr(at + 1), sep == 'x' ? "count" : "k", 100000));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string(option) + " '" + item + "': " + e.what());
    }
  }
  return out;
}

}  // namespace dcalign::gpu_probe
