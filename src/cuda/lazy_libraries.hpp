#pragma once
// cuBLAS and cuSOLVER are loaded when the CUDA backend first calls them, not when a program
// that links dcalign starts (lazy_libraries.cpp).
#include <string>
#include <vector>

namespace dcalign::cuda {

/// Loads cuBLAS and cuSOLVER, looks up every function the backend calls through them and makes
/// two calls that need no GPU through the forwarding definitions (cuSOLVER's version must be
/// the headers', cuBLAS must name a status). Returns one line per problem, or an empty string.
/// For tests and diagnostics; the backend itself loads a library on its first call into it.
std::string check_lazy_libraries();

/// Where a library is looked for, in order, after the system's search by soname
/// (LD_LIBRARY_PATH, run paths, the loader cache) has failed: the directories of NVIDIA's PyPI
/// wheels beside the Python module this code is part of (wheel_library_dirs of its
/// site-packages; none outside a module), then the directory the toolkit's library was found
/// in when dcalign was built.
std::vector<std::string> library_fallback_dirs();

/// The directories where NVIDIA's PyPI wheels put cuBLAS and cuSOLVER below a site-packages
/// directory (`pip install dcalign[cuda13]`): nvidia/cu13/lib, which CUDA 13's wheels share,
/// then nvidia/cublas/lib and nvidia/cusolver/lib, CUDA 12's one directory per library.
std::vector<std::string> wheel_library_dirs(const std::string& site_packages);

/// check_lazy_libraries' lookup through NVIDIA's wheels below `site_packages` alone: opens
/// cuBLAS and cuSOLVER from wheel_library_dirs(site_packages) only (never the system's search
/// or the build's directory), on handles of its own, and looks up every function of the table.
/// Returns one line per problem, or an empty string; `opened` receives the paths the loader
/// reports for the two libraries. For tests: the loader's wheel route without the wheels.
std::string check_lazy_libraries_in(const std::string& site_packages,
                                    std::vector<std::string>* opened);

/// The directory the build found the toolkit's cuBLAS in.
std::string toolkit_library_dir();

}  // namespace dcalign::cuda
