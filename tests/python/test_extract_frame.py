"""spexlab.extract_frame against the CLI's frame on a simulated exposure, with
gpu_specter's signature, result keys, shapes, dtypes and units; the PSF as a file and
as gpu_specter's astropy tables; errors as Python exceptions; the GIL released."""
import inspect
import os
import threading
import unittest

import numpy as np
from astropy.io import fits

import spexlab
import spexlab_testutil as tu


class ExtractFrameTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tu.tempdir()
        cls.preproc, cls.psf = tu.simulate(cls.tmp.name)
        cls.frame_path = os.path.join(cls.tmp.name, "frame.fits")
        cls.model_path = os.path.join(cls.tmp.name, "model.fits")
        tu.cli_extract(cls.preproc, cls.psf, cls.frame_path, "-m", cls.model_path)
        cls.img = spexlab.read_img(cls.preproc)
        cls.result = spexlab.extract_frame(cls.img, cls.psf, 25, 0, tu.NSPEC, tu.WAVE,
                                           model=True, gpu=False)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_signature_is_gpu_specters(self):
        # gpu_specter.core.extract_frame's parameters, in order, with its defaults.
        expected = [("img", None), ("psf", None), ("bundlesize", None), ("specmin", None),
                    ("nspec", None), ("wavelength", None), ("nwavestep", 50),
                    ("nsubbundles", 1), ("model", None), ("regularize", 0), ("psferr", None),
                    ("comm", None), ("gpu", None), ("loglevel", None), ("timing", None),
                    ("wavepad", 10), ("pixpad_frac", 0.8), ("wavepad_frac", 0.2),
                    ("batch_subbundle", True), ("ranks_per_bundle", None)]
        params = list(inspect.signature(spexlab.extract_frame).parameters.values())
        for (name, default), p in zip(expected, params):
            self.assertEqual(p.name, name)
            if p.default is not inspect.Parameter.empty:
                self.assertEqual(p.default, default, name)
        for p in params[:5]:
            self.assertIs(p.default, inspect.Parameter.empty, p.name)

    def test_keys_shapes_dtypes(self):
        r = self.result
        nwave = len(np.arange(6000, 6300 + 0.4, 0.8))
        for key in ("specflux", "specivar", "pixmask_fraction", "chi2pix"):
            self.assertEqual(r[key].shape, (tu.NSPEC, nwave), key)
            self.assertEqual(r[key].dtype, np.float64, key)
        self.assertEqual(r["specmask"].dtype, np.int64)
        np.testing.assert_array_equal(r["specmask"], (r["specivar"] == 0).astype(int))
        np.testing.assert_array_equal(r["wave"], np.arange(6000, 6300 + 0.4, 0.8))
        self.assertEqual(r["Rdiags"].shape, (tu.NSPEC, 11, nwave))  # 2 HSIZEY + 1
        self.assertEqual(r["modelimage"].shape, self.img["image"].shape)
        self.assertGreater(np.count_nonzero(r["specivar"]), 0.9 * r["specivar"].size)

    def test_same_as_cli_frame(self):
        r = self.result
        with fits.open(self.frame_path) as f:
            flux, ivar = f["FLUX"].data, f["IVAR"].data
            # The frame stores float32: agreement to float32 rounding.
            np.testing.assert_allclose(r["specflux"], flux, rtol=2e-6,
                                       atol=2e-6 * np.abs(flux).max())
            np.testing.assert_allclose(r["specivar"], ivar, rtol=2e-6)
            np.testing.assert_allclose(r["Rdiags"], f["RESOLUTION"].data, rtol=2e-6, atol=1e-7)
            np.testing.assert_allclose(r["chi2pix"], f["CHI2PIX"].data, rtol=2e-6, atol=1e-6)
            np.testing.assert_array_equal(r["mask"], f["MASK"].data)
            np.testing.assert_allclose(r["wave"], f["WAVELENGTH"].data, rtol=0, atol=1e-9)
            # desispec's main_gpu_specter derives the frame mask from these two keys.
            mask = np.zeros(r["specflux"].shape, np.uint32)
            mask[r["pixmask_fraction"] > 0.5] |= 1
            mask[r["pixmask_fraction"] == 1.0] |= 2
            mask[r["chi2pix"] > 100.0] |= 128
            np.testing.assert_array_equal(mask, f["MASK"].data)
        with fits.open(self.model_path) as m:
            np.testing.assert_allclose(r["modelimage"], m[0].data, rtol=2e-6,
                                       atol=2e-6 * np.abs(m[0].data).max())

    def test_psf_as_gpu_specter_tables(self):
        tables = tu.psf_tables(self.psf)
        r = spexlab.extract_frame(self.img, tables, 25, 0, 25, (6000.0, 6300.0, 0.8), gpu=False)
        # Same numbers as from the file: the tables carry the same coefficients.
        np.testing.assert_array_equal(r["specflux"], self.result["specflux"][:25])
        np.testing.assert_array_equal(r["Rdiags"], self.result["Rdiags"][:25])

    def test_wavelength_forms(self):
        wave = np.arange(6000, 6300 + 0.4, 0.8)
        r = spexlab.extract_frame(self.img, self.psf, 25, 25, 25, wave, gpu=False)
        # The step comes from the array (np.gradient, as gpu_specter takes it), 0.8 to
        # ~1e-13: wavelengths move by ~1e-11 A, far below what changes a flux at 1e-9.
        np.testing.assert_allclose(r["specflux"], self.result["specflux"][25:], rtol=1e-9,
                                   atol=1e-9 * np.abs(r["specflux"]).max())

    def test_errors_are_python_exceptions(self):
        with self.assertRaisesRegex(spexlab.SpexError, "no-such-psf.fits"):
            spexlab.extract_frame(self.img, "/nonexistent/no-such-psf.fits", 25, 0, 25, tu.WAVE)
        with self.assertRaisesRegex(ValueError, "fiber"):
            spexlab.extract_frame(self.img, self.psf, 25, 490, 25, tu.WAVE, gpu=False)
        with self.assertRaisesRegex(ValueError, "wavelength"):
            spexlab.extract_frame(self.img, self.psf, 25, 0, 25, "6000,6300", gpu=False)
        bad = {"image": self.img["image"], "ivar": self.img["ivar"][:10]}
        with self.assertRaisesRegex(ValueError, "shape"):
            spexlab.extract_frame(bad, self.psf, 25, 0, 25, tu.WAVE, gpu=False)
        tables = tu.psf_tables(self.psf)
        del tables["PSF"].meta["NPIX_X"]
        with self.assertRaisesRegex(ValueError, "NPIX_X"):
            spexlab.read_psf(tables)
        # The tables get the physical-range checks files get (issue 11 #4): a zero
        # Gauss-Hermite width for one fiber is refused, naming the parameter.
        tables = tu.psf_tables(self.psf)
        psf_rows = tables["PSF"]
        row = [i for i, p in enumerate(psf_rows["PARAM"]) if str(p).strip() == "GHSIGX"][0]
        psf_rows["COEFF"][row][3] = 0.0
        with self.assertRaisesRegex(spexlab.SpexError, "GHSIGX is 0 px at fiber 3.*widths must lie"):
            spexlab.read_psf(tables)

    def test_input_arrays_untouched(self):
        img = {"image": self.img["image"].copy(), "ivar": self.img["ivar"].copy()}
        img["ivar"][0, 0] = np.nan  # the engine masks it in its own copy
        before = img["ivar"].copy()
        spexlab.extract_frame(img, self.psf, 25, 0, 25, tu.WAVE, gpu=False)
        np.testing.assert_array_equal(img["ivar"], before)

    def test_gil_released_while_extracting(self):
        # While the engine runs, a Python thread keeps counting; with the GIL held it
        # could not run at all until the call returned.
        ticks = []
        stop = threading.Event()

        def count():
            while not stop.is_set():
                ticks.append(1)

        psf = spexlab.read_psf(self.psf)
        image, ivar = self.img["image"], self.img["ivar"]
        t = threading.Thread(target=count)
        t.start()
        seen = []
        orig = spexlab._spexlab.extract

        def probe(*a):
            start = len(ticks)
            out = orig(*a)
            seen.append(len(ticks) - start)
            return out
        spexlab._spexlab.extract = probe
        try:
            spexlab.extract_frame({"image": image, "ivar": ivar}, psf, 25, 0, 25, tu.WAVE,
                                  gpu=False)
        finally:
            spexlab._spexlab.extract = orig
            stop.set()
            t.join()
        self.assertGreater(seen[0], 1000)

    def test_result_arrays_are_not_copies(self):
        # The engine's buffers become the arrays: no NumPy-owned copy.
        for key in ("specflux", "Rdiags", "chi2pix"):
            self.assertFalse(self.result[key].flags["OWNDATA"], key)

    def test_read_img_is_gpu_specter_shaped(self):
        self.assertEqual(self.img["image"].dtype, np.float64)
        self.assertEqual(self.img["ivar"].dtype, np.float64)
        with fits.open(self.preproc) as f:
            mask = f["MASK"].data
            np.testing.assert_array_equal(self.img["ivar"][mask != 0], 0)
            np.testing.assert_allclose(self.img["image"], f["IMAGE"].data)


if __name__ == "__main__":
    unittest.main()
