// cuBLAS and cuSOLVER reach the CUDA backend through src/cuda/lazy_libraries.cpp, which opens
// them on first use. The checks need the CUDA toolkit's libraries but no GPU: every function of
// the table resolves, and calls forward to the real library (check_lazy_libraries makes them
// inside the library, where the forwarding definitions are visible also when it is shared).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cuda/lazy_libraries.hpp"

namespace dcalign {
namespace {

namespace fs = std::filesystem;

TEST(CudaLibraries, EveryFunctionOfTheBackendResolvesAndForwards) {
  EXPECT_EQ(cuda::check_lazy_libraries(), "");
}

TEST(CudaLibraries, NvidiaWheelDirectoriesOfASitePackages) {
  EXPECT_EQ(cuda::wheel_library_dirs("/v/lib/python3.12/site-packages"),
            (std::vector<std::string>{"/v/lib/python3.12/site-packages/nvidia/cu13/lib",
                                      "/v/lib/python3.12/site-packages/nvidia/cublas/lib",
                                      "/v/lib/python3.12/site-packages/nvidia/cusolver/lib"}));
  // Outside a Python module only the build's directory follows the system's search.
  EXPECT_EQ(cuda::library_fallback_dirs(), (std::vector<std::string>{cuda::toolkit_library_dir()}));
}

// `pip install dcalign[cuda13]` puts cuBLAS and cuSOLVER into <site-packages>/nvidia/cu13/lib.
// A fake of that tree whose libraries are links to this machine's toolkit: every function of the
// table resolves through it alone (its own handles, opened from the tree's paths; this test
// runs in a process of its own, which has loaded neither library before).
TEST(CudaLibraries, EveryFunctionResolvesThroughNvidiasWheelTreeAlone) {
  const fs::path site = fs::temp_directory_path() /
                        ("dcalign_wheel_tree_" + std::to_string(::getpid())) / "site-packages";
  const fs::path lib = site / "nvidia" / "cu13" / "lib";
  fs::create_directories(lib);
  int linked = 0;
  for (const auto& entry : fs::directory_iterator(cuda::toolkit_library_dir())) {
    const std::string name = entry.path().filename().string();
    for (const char* prefix : {"libcublas", "libcusolver.so", "libcusparse.so", "libnvJitLink.so"})
      if (name.rfind(prefix, 0) == 0 && name.find(".so") != std::string::npos) {
        fs::create_symlink(entry.path(), lib / name);
        ++linked;
      }
  }
  ASSERT_GE(linked, 4) << cuda::toolkit_library_dir();
  std::vector<std::string> opened;
  EXPECT_EQ(cuda::check_lazy_libraries_in(site.string(), &opened), "");
  ASSERT_EQ(opened.size(), 2u);
  for (const auto& path : opened) EXPECT_EQ(path.rfind(lib.string(), 0), 0u) << path;
  // A tree without the libraries names what is missing.
  const fs::path empty = site.parent_path() / "empty-site-packages";
  fs::create_directories(empty);
  std::vector<std::string> none;
  const std::string problems = cuda::check_lazy_libraries_in(empty.string(), &none);
  EXPECT_NE(problems.find("is in none of the wheel directories below " + empty.string()),
            std::string::npos)
      << problems;
  EXPECT_TRUE(none.empty());
  fs::remove_all(site.parent_path());
}

}  // namespace
}  // namespace dcalign
