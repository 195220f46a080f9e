// Builds without RDKit: the molecule datasets and fingerprints say why they cannot run.
#include "dcalign/error.hpp"
#include "molecules_internal.hpp"

namespace dcalign::data {

bool have_rdkit() { return false; }

namespace detail {

ParsedMolecule parse_molecule(const std::string&, const MorganOptions&) {
  throw BackendError(
      "molecules: dcalign was built without RDKit, which turns SMILES into Morgan fingerprints; "
      "install Debian's librdkit-dev (scripts/install-deps.sh does) and reconfigure");
}

}  // namespace detail
}  // namespace dcalign::data
