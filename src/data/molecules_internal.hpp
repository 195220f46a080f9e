#pragma once
// The molecule layer's split: parse_molecule is the one function that needs RDKit
// (molecules.cpp, or molecules_unavailable.cpp in builds without it); the fingerprint matrix, the
// cache and the dataset loaders (molecule_datasets.cpp) are plain C++.
#include <string>
#include <vector>

#include "dcalign/data.hpp"

namespace dcalign::data::detail {

struct ParsedMolecule {
  bool ok = false;           ///< false: RDKit could not read the SMILES
  std::string canonical;     ///< RDKit's canonical SMILES
  std::vector<int> on_bits;  ///< set bits of the Morgan fingerprint, increasing
};

/// One SMILES string to its canonical form and Morgan bit fingerprint (opts already checked).
/// Throws BackendError in builds without RDKit.
ParsedMolecule parse_molecule(const std::string& smiles, const MorganOptions& opts);

/// "hiv" and "bbbp" (MoleculeNet), from <dir>/molecules/.
TrainTest load_molecules(const std::string& name, const std::string& dir, const LoadOptions& opts);

}  // namespace dcalign::data::detail
