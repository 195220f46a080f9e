#!/usr/bin/python3
"""Writes the small .npy fixtures read by tests/io/test_npy.cpp.

Run from anywhere: /usr/bin/python3 tests/data/npy/make_fixtures.py
The files are committed; rerun only to change them. Every value is chosen so that the C++ test
can recompute it independently of the file: 2-D arrays hold arr[i, j] = 10*i + j and 3-D arrays
hold arr[s, i, j] = 100*s + 10*i + j, all exactly representable in float32 and float64.
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def grid2(rows, cols, dtype):
    i, j = np.indices((rows, cols))
    return (10 * i + j).astype(dtype)


def grid3(count, rows, cols, dtype):
    s, i, j = np.indices((count, rows, cols))
    return (100 * s + 10 * i + j).astype(dtype)


def save(name, arr, version=None):
    path = os.path.join(HERE, name)
    with open(path, "wb") as f:
        np.lib.format.write_array(f, arr, version=version)
    # Guard against the generator silently writing something else than intended.
    back = np.load(path)
    assert back.dtype == arr.dtype and back.shape == arr.shape and (back == arr).all(), name
    assert os.path.getsize(path) < 1024, name
    with open(path, "rb") as f:
        head = f.read(128)
    want = b"'fortran_order': True" if arr.ndim > 1 and not arr.flags.c_contiguous else \
        b"'fortran_order': False"
    assert want in head, name


def main():
    # Shapes are non-square and the three extents distinct, so that a swapped index is caught.
    for code, dtype in (("f4", np.float32), ("f8", np.float64)):
        save(f"c_{code}_2d.npy", grid2(3, 4, dtype))
        save(f"f_{code}_2d.npy", np.asfortranarray(grid2(3, 4, dtype)))
        save(f"c_{code}_3d.npy", grid3(2, 3, 4, dtype))
        save(f"f_{code}_3d.npy", np.asfortranarray(grid3(2, 3, 4, dtype)))
    # Format versions 2.0 and 3.0 (NumPy only picks them for huge or non-latin-1 headers, so
    # they are forced here).
    save("v2_f8_2d.npy", grid2(3, 4, np.float64), version=(2, 0))
    save("v3_f4_3d.npy", grid3(2, 3, 4, np.float32), version=(3, 0))
    # Big-endian data, which the reader byte-swaps.
    save("be_f8_3d.npy", grid3(2, 3, 4, np.dtype(">f8")))
    # float32 values that are not exact in binary: reading them as double must widen the float32
    # value (0.1f), not recover the decimal 0.1.
    save("c_f4_tenths.npy", np.array([[0.1, 0.2, 0.3], [0.7, 1.5, -2.25]], dtype=np.float32))


if __name__ == "__main__":
    main()
