"""spexlab.extract_frame with an mpi4py communicator (run under mpirun -n 2): the
bundles are split over the ranks, the frame comes back on rank 0 only, and it is
the frame one process extracts, bit for bit."""
import os
import unittest

import numpy as np
from mpi4py import MPI

import spexlab
import spexlab_testutil as tu


class ExtractFrameMpiTest(unittest.TestCase):
    def test_two_ranks_same_frame(self):
        comm = MPI.COMM_WORLD
        self.assertGreaterEqual(comm.size, 2, "run this under mpirun -n 2")
        tmp = tu.tempdir() if comm.rank == 0 else None
        paths = tu.simulate(tmp.name) if comm.rank == 0 else None
        preproc, psf = comm.bcast(paths, root=0)
        img = spexlab.read_img(preproc) if comm.rank == 0 else None
        r = spexlab.extract_frame(img, psf, 25, 0, tu.NSPEC, tu.WAVE, model=True, comm=comm,
                                  gpu=False, threads=1)
        if comm.rank != 0:
            self.assertIsNone(r)
        else:
            one = spexlab.extract_frame(img, psf, 25, 0, tu.NSPEC, tu.WAVE, model=True,
                                        gpu=False, threads=1)
            for key in ("specflux", "specivar", "specmask", "Rdiags", "pixmask_fraction",
                        "chi2pix", "wave", "mask"):
                np.testing.assert_array_equal(r[key], one[key], key)
            np.testing.assert_allclose(r["modelimage"], one["modelimage"], rtol=1e-12, atol=1e-9)
        # A bad request fails on every rank, with the engine's message, and no hang.
        with self.assertRaisesRegex(ValueError, "fiber"):
            spexlab.extract_frame(img, psf, 25, 480, 50, tu.WAVE, comm=comm, gpu=False)
        comm.barrier()
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    unittest.main()
