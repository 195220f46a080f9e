// Molecules: SMILES -> Morgan bit fingerprints with RDKit, and the MoleculeNet HIV and BBBP
// sets (paper 003 section IV-B: 2048-bit Morgan fingerprints of radius 2). This is the only
// translation unit that includes RDKit; builds without it compile molecules_unavailable.cpp.
#include <DataStructs/ExplicitBitVect.h>
#include <GraphMol/Fingerprints/MorganFingerprints.h>
#include <GraphMol/GraphMol.h>
#include <GraphMol/SmilesParse/SmilesParse.h>
#include <GraphMol/SmilesParse/SmilesWrite.h>
#include <RDGeneral/RDLog.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "molecules_internal.hpp"

namespace dcalign::data {

bool have_rdkit() { return true; }

namespace detail {

namespace {

// RDKit reports every SMILES it rejects on its error log; the loaders count and report those
// rows themselves, so the log is silenced once per process.
void quiet_rdkit() {
  static std::once_flag once;
  std::call_once(once, [] { boost::logging::disable_logs("rdApp.*"); });
}

}  // namespace

ParsedMolecule parse_molecule(const std::string& smiles, const MorganOptions& opts) {
  quiet_rdkit();
  ParsedMolecule out;
  std::unique_ptr<RDKit::RWMol> mol;
  try {
    mol.reset(RDKit::SmilesToMol(smiles));
  } catch (const std::exception&) {
    // Some malformed inputs (valence errors, kekulisation failures) throw instead of
    // returning nullptr; both mean RDKit cannot read the molecule.
    mol.reset();
  }
  if (!mol) return out;
  std::unique_ptr<ExplicitBitVect> fp(RDKit::MorganFingerprints::getFingerprintAsBitVect(
      *mol, static_cast<unsigned>(opts.radius), static_cast<unsigned>(opts.bits)));
  out.ok = true;
  out.canonical = RDKit::MolToSmiles(*mol);
  for (int b = 0; b < opts.bits; ++b)
    if (fp->getBit(static_cast<unsigned>(b))) out.on_bits.push_back(b);
  return out;
}

}  // namespace detail
}  // namespace dcalign::data
