#!/usr/bin/env bash
# A dcalign-mpi that loses rank 1 once: the first time rank 1 starts (no marker file yet), it
# creates the marker and kills itself with SIGKILL, as a crashed host would; every later start
# runs the real dcalign-mpi. For the MPI path's tests of dcalign-server (test_mpi.cpp).
#   DCALIGN_TEST_KILL_MARKER  the marker file
#   DCALIGN_TEST_REAL_MPI     the real dcalign-mpi
if [[ ${OMPI_COMM_WORLD_RANK:-} == 1 && ! -e $DCALIGN_TEST_KILL_MARKER ]]; then
  : > "$DCALIGN_TEST_KILL_MARKER"
  kill -9 $$
fi
exec "$DCALIGN_TEST_REAL_MPI" "$@"
