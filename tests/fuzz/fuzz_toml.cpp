// libFuzzer target: the TOML experiment-file parser (dcalign::experiment::load_config, with
// toml++). The input is the file. It is only parsed and validated, never run: load_config
// either returns a Config whose values passed its checks or throws dcalign::Error.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "dcalign/error.hpp"
#include "dcalign/experiment.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static dcalign::fuzz::ScratchFile file("toml", ".toml");
  const std::string& path = file.write(data, size);
  try {
    const dcalign::experiment::Config c = dcalign::experiment::load_config(path);
    if (!dcalign::experiment::experiment_name_problem(c.name).empty() || c.dataset.empty() ||
        c.users < 1 || c.samples_per_user < 0 ||
        (c.samples_per_user == 0 && c.partition != "label-skew") || c.anchor_rows < 1 ||
        c.dim < 0 || c.trials < 1 || c.conditions.empty() || c.methods.empty() ||
        c.models.empty()) {
      std::fprintf(stderr, "fuzz_toml: load_config accepted an invalid configuration\n");
      std::abort();
    }
  } catch (const dcalign::Error&) {
    // Syntax errors, unknown keys, wrong types and values out of range: InvalidInput.
  } catch (const std::exception& e) {
    dcalign::fuzz::unexpected("fuzz_toml", e.what());
  }
  return 0;
}
