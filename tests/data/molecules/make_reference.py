#!/usr/bin/env python3
"""Writes morgan_reference.json beside this script: RDKit's Python bindings (Debian's
python3-rdkit), independent of dcalign's C++ path, give the canonical SMILES and the set bits of
the 2048-bit Morgan fingerprint of radius 2 for a few molecules, for SMILES RDKit rejects, and for
the first rows and the label counts of MoleculeNet BBBP as dcalign's loader keeps them.

Usage: /usr/bin/python3 tests/data/molecules/make_reference.py [DATA_DIR]
"""
import csv
import json
import os
import sys

from rdkit import Chem, RDLogger
from rdkit.Chem import AllChem

RDLogger.DisableLog("rdApp.*")

MOLECULES = [
    "CCO",                                  # ethanol
    "c1ccccc1O",                            # phenol (aromatic)
    "CC(=O)Oc1ccccc1C(=O)O",                # aspirin
    "C[C@H](N)C(=O)O",                      # L-alanine (chirality is not in the fingerprint)
    "[NH4+].[Cl-]",                         # two fragments, charges
    "CN1C=NC2=C1C(=O)N(C(=O)N2C)C",         # caffeine, written in Kekule form
    "C",                                    # methane
    "FC(F)(F)c1ccc(cc1)C#N",
]
INVALID = ["C1CC", "not a smiles", "c1cccc1", "C(C)(C)(C)(C)C"]


def entry(smiles, radius=2, bits=2048):
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        return None
    fp = AllChem.GetMorganFingerprintAsBitVect(mol, radius, nBits=bits)
    return {"smiles": smiles, "canonical": Chem.MolToSmiles(mol), "on_bits": list(fp.GetOnBits())}


def main():
    data_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "..", "..", "..", "shared", "datasets")
    out = {"radius": 2, "bits": 2048,
           "molecules": [entry(s) for s in MOLECULES],
           "invalid": [s for s in INVALID if Chem.MolFromSmiles(s) is None],
           "radius1_bits64": [entry(s, 1, 64) for s in MOLECULES[:3]]}
    rows, failed, labels = [], [], {0: 0, 1: 0}
    with open(os.path.join(data_dir, "molecules", "BBBP.csv")) as f:
        for i, r in enumerate(csv.DictReader(f)):
            e = entry(r["smiles"])
            if e is None:
                failed.append(i)
                continue
            labels[int(r["p_np"])] += 1
            if len(rows) < 5:
                e["label"] = int(r["p_np"])
                rows.append(e)
    out["bbbp"] = {"first_rows": rows, "failed_rows": failed, "kept": labels[0] + labels[1],
                   "label_counts": [labels[0], labels[1]]}
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "morgan_reference.json"),
              "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
