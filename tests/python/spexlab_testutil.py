"""Shared fixtures of the Python suites: a small simulated exposure made by
spexlab-cli simulate (50 fibers = 2 bundles, 6000-6300 A), and the CLI itself."""
import os
import subprocess
import tempfile

CLI = os.environ.get("SPEXLAB_CLI", "spexlab-cli")
WAVE = "6000,6300,0.8"
NSPEC = 50


def simulate(directory):
    subprocess.run([CLI, "simulate", "-o", directory, "-n", str(NSPEC), "-w", WAVE,
                    "--seed", "7", "--quiet"], check=True)
    return os.path.join(directory, "preproc.fits"), os.path.join(directory, "psf.fits")


def cli_extract(preproc, psf, out, *extra):
    subprocess.run([CLI, "extract", "-i", preproc, "-p", psf, "-o", out, "-w", WAVE,
                    "-s", "0", "-n", str(NSPEC), "--nsubbundles", "1", "--engine", "cpu",
                    "--quiet", *extra], check=True)


def psf_tables(path):
    """The dict gpu_specter.io.read_psf returns, built the same way with astropy:
    PSF as a Table, XTRACE/YTRACE as one-column Tables with WAVEMIN/WAVEMAX meta."""
    from astropy.io import fits
    from astropy.table import Table
    out = {"PSF": Table.read(path, "PSF")}
    with fits.open(path) as fx:
        for name in ("XTRACE", "YTRACE"):
            t = Table()
            t[name[0]] = fx[name].data
            for key in ("WAVEMIN", "WAVEMAX"):
                t.meta[key] = fx[name].header[key]
            out[name] = t
    return out


def tempdir():
    return tempfile.TemporaryDirectory(prefix="spexlab-py-")
