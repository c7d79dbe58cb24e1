"""SpexLab from Python: gpu_specter's ``extract_frame`` call on the SpexLab engine.

desispec calls ``gpu_specter.core.extract_frame`` in-process inside its MPI jobs;
``spexlab.extract_frame`` takes the same arguments, defaults and units and returns
the same dict, so it can stand in for it (docs/desi.md, "Calling SpexLab from
desispec"). The engine (CPU or CUDA) stays warm between calls in one process.

    import spexlab
    img = spexlab.read_img("preproc-r0-00067784.fits")
    psf = spexlab.read_psf("psf-r0-00067784.fits")
    frame = spexlab.extract_frame(img, psf, 25, 0, 500, "5760,7620,0.8", nsubbundles=5)
"""

import time

import numpy as np

from . import _spexlab
from ._spexlab import InputError, Psf, SpexError

__all__ = ["extract_frame", "read_psf", "read_img", "Psf", "SpexError", "InputError",
           "default_threads", "describe_gpus"]
__version__ = _spexlab.__version__


def default_threads():
    """(threads, source): the CPU worker count the engine takes by default, from
    OMP_NUM_THREADS, SLURM_CPUS_PER_TASK or the affinity mask."""
    return _spexlab.default_threads()


def describe_gpus():
    """The GPUs the CUDA engine sees, or 'none (why)'."""
    return _spexlab.describe_gpus()


def read_psf(psf):
    """A PSF the engine can use, from a psf-*.fits path, from the dict that
    ``gpu_specter.io.read_psf`` returns (tables ``PSF``, ``XTRACE``, ``YTRACE`` with
    their ``.meta``; anything indexable that way works), or an existing Psf."""
    if isinstance(psf, Psf):
        return psf
    if isinstance(psf, (str, bytes)) or hasattr(psf, "__fspath__"):
        import os
        return _spexlab.read_psf_file(os.fsdecode(psf))
    try:
        table, xt, yt = psf["PSF"], psf["XTRACE"], psf["YTRACE"]
    except (KeyError, TypeError, IndexError) as e:
        raise InputError(f"psf must be a file path or a dict with PSF, XTRACE and YTRACE tables "
                         f"(gpu_specter.io.read_psf), got {type(psf).__name__}") from e

    def meta(t, name):
        m = getattr(t, "meta", None)
        if m is None:
            raise InputError(f"psf['{name}'] has no .meta (expected an astropy Table)")
        return {str(k).upper(): v for k, v in dict(m).items()}

    def column(t, name, col):
        try:
            return np.asarray(t[col], dtype=np.float64)
        except (KeyError, ValueError) as e:
            raise InputError(f"psf['{name}'] has no column {col}") from e

    def trace(name, col):
        t = psf[name]
        m = meta(t, name)
        for key in ("WAVEMIN", "WAVEMAX"):
            if key not in m:
                raise InputError(f"psf['{name}'].meta has no {key}")
        c = column(t, name, col)
        if c.ndim == 3 and c.shape[0] == 1:  # a one-row table holding the whole image
            c = c[0]
        return np.ascontiguousarray(c), float(m["WAVEMIN"]), float(m["WAVEMAX"])

    x, xwmin, xwmax = trace("XTRACE", "X")
    y, ywmin, ywmax = trace("YTRACE", "Y")
    names = [p.decode() if isinstance(p, bytes) else str(p) for p in np.asarray(table["PARAM"])]
    names = [p.strip() for p in names]
    coeff = np.ascontiguousarray(column(table, "PSF", "COEFF"))
    m = meta(table, "PSF")
    keep = {}
    for k, v in m.items():
        if isinstance(v, (bool, np.bool_)):
            continue
        if isinstance(v, (int, float, np.integer, np.floating)):
            keep[k] = float(v) if isinstance(v, (float, np.floating)) else int(v)
        elif isinstance(v, str) and k == "PSFTYPE":
            keep[k] = v.strip()
    return _spexlab.psf_from_tables(x, xwmin, xwmax, y, ywmin, ywmax, names, coeff, keep)


def read_img(filename):
    """A preproc file as gpu_specter's image dict: ``image`` and ``ivar`` (float64,
    ivar 0 where MASK has an extraction bit or the pixel is NaN/Inf), ``mask``
    (int32), ``imagehdr`` (dict of header values as written)."""
    import os
    return _spexlab.read_img(os.fsdecode(filename))


def _host_array(a, what):
    """A NumPy view of an image plane; CuPy arrays are copied to the host."""
    if a is None:
        raise InputError(f"img['{what}'] is missing")
    if type(a).__module__.startswith("cupy"):
        a = a.get()
    return np.asarray(a)


def _wave_grid(wavelength, psf):
    """(wmin, wmax, dw) as gpu_specter reads ``wavelength``: a 'wmin,wmax,dw' string,
    a (wmin, wmax, dw) tuple, a wavelength array, or None (the PSF table's
    WAVEMIN/WAVEMAX in steps of 0.8)."""
    if isinstance(wavelength, np.ndarray):
        if wavelength.size < 2:
            raise InputError("wavelength array needs at least 2 values")
        dw = float(np.gradient(wavelength)[0])
        if not np.allclose(np.diff(wavelength), dw):
            raise InputError("wavelength array must be uniformly spaced")
        return float(wavelength[0]), float(wavelength[-1]), dw
    if isinstance(wavelength, str):
        try:
            wmin, wmax, dw = map(float, wavelength.split(","))
        except ValueError as e:
            raise InputError(f"wavelength must be 'wmin,wmax,dw', got '{wavelength}'") from e
        return wmin, wmax, dw
    if isinstance(wavelength, (tuple, list)):
        if len(wavelength) != 3:
            raise InputError(f"wavelength tuple must be (wmin, wmax, dw), got {wavelength!r}")
        return tuple(float(v) for v in wavelength)
    if wavelength is None:
        return psf.table_wavemin, psf.table_wavemax, 0.8
    raise InputError(f"wavelength must be None, 'wmin,wmax,dw', a tuple or an array, "
                     f"got {type(wavelength).__name__}")


def _engine_kind(gpu):
    if gpu is None:
        return "auto"
    if isinstance(gpu, str):
        return gpu
    return "cuda" if gpu else "cpu"


def extract_frame(img, psf, bundlesize, specmin, nspec, wavelength=None, nwavestep=50,
                  nsubbundles=1, model=None, regularize=0, psferr=None, comm=None, gpu=None,
                  loglevel=None, timing=None, wavepad=10, pixpad_frac=0.8, wavepad_frac=0.2,
                  batch_subbundle=True, ranks_per_bundle=None, threads=0, gpus=None):
    """Extract 1D spectra from a 2D image (gpu_specter.core.extract_frame's call).

    Args:
        img: dict with ``image`` and ``ivar`` 2D arrays (optional ``mask``: pixels
            with mask != 0 get ivar 0), as gpu_specter.io.read_img returns
        psf: psf-*.fits path, gpu_specter.io.read_psf's dict, or a spexlab.Psf
        bundlesize: spectra per bundle (25 for DESI)
        specmin, nspec: extract spectra [specmin, specmin + nspec)
        wavelength: 'wmin,wmax,dw', (wmin, wmax, dw), an array, or None
        nwavestep: wavelength bins per patch; nsubbundles: patches per bundle
        model: truthy to also return the model image
        regularize, psferr (None: the PSF's PSFERR), wavepad, pixpad_frac, wavepad_frac:
            as in gpu_specter
        comm: mpi4py communicator or None; bundles are split over its ranks and the
            frame is returned on rank 0 (None on the others)
        gpu: True (CUDA engine, error without a GPU), False (CPU), None (CUDA when a
            GPU is usable, else CPU)
        timing: dict to receive time stamps, as gpu_specter fills it
        threads: CPU engine threads (0: core/threads.h's default);
        gpus: device numbers for the CUDA engine (None: every visible one)
        loglevel, batch_subbundle, ranks_per_bundle: accepted for compatibility

    Returns (rank 0):
        dict with specflux, specivar [nspec, nwave] (electrons/A, 1/(electrons/A)^2),
        specmask (int64, 1 where specivar == 0, as gpu_specter), wave [nwave],
        Rdiags [nspec, 2 ndiag + 1, nwave], pixmask_fraction, chi2pix [nspec, nwave],
        modelimage (image-shaped, or None); all float64. Extra keys: ``mask``
        (uint32 desispec frame mask bits), ``engine``.
    """
    del loglevel, batch_subbundle, ranks_per_bundle
    time_start = time.time()
    rank, size = (0, 1) if comm is None else (comm.rank, comm.size)

    # Inputs: read or converted on rank 0, broadcast to the others (gpu_specter does
    # the same with the image planes and the PSF object).
    psf_obj = None
    error = None
    planes = None
    if rank == 0:
        try:
            psf_obj = read_psf(psf)
            image = _host_array(img["image"], "image") if img is not None else None
            ivar = _host_array(img["ivar"], "ivar") if img is not None else None
            mask = img.get("mask") if hasattr(img, "get") else None
            if mask is not None:
                mask = _host_array(mask, "mask")
            planes = (image, ivar, mask)
            wave = _wave_grid(wavelength, psf_obj)
        except Exception as e:  # raised on every rank below, never a hang
            error = e
    time_init = time.time()
    if comm is not None:
        error = comm.bcast(error, root=0)
    if error is not None:
        raise error
    if comm is not None:
        psf_path = comm.bcast((psf_obj.path or None) if rank == 0 else None, root=0)
        if psf_path is not None and rank > 0:
            psf_obj = _spexlab.read_psf_file(psf_path)
        elif psf_path is None:
            # An in-memory PSF (from tables): the ranks rebuild it from the same tables.
            psf_tables = comm.bcast(psf if rank == 0 else None, root=0)
            if rank > 0:
                psf_obj = read_psf(psf_tables)
        wave = comm.bcast(wave if rank == 0 else None, root=0)
        shape = comm.bcast(planes[0].shape if rank == 0 else None, root=0)
        has_mask = comm.bcast(rank == 0 and planes[2] is not None, root=0)
        if rank == 0:
            bufs = [np.ascontiguousarray(planes[0], dtype=np.float64),
                    np.ascontiguousarray(planes[1], dtype=np.float64)]
            if has_mask:
                bufs.append(np.ascontiguousarray(planes[2], dtype=np.int32))
        else:
            bufs = [np.empty(shape, np.float64), np.empty(shape, np.float64)]
            if has_mask:
                bufs.append(np.empty(shape, np.int32))
        for b in bufs:
            comm.Bcast(b, root=0)
        planes = (bufs[0], bufs[1], bufs[2] if has_mask else None)
    time_bcast = time.time()

    # gpu_specter pads wavepad + int(wavepad * wavepad_frac) bins; the engine's
    # PatchParams counts 10 + int(10 * wavepadFrac): pick the fraction that gives the
    # same number of bins.
    pad = int(wavepad) + int(int(wavepad) * wavepad_frac)
    if pad < 10:
        raise InputError(f"wavepad {wavepad} with wavepad_frac {wavepad_frac} pads {pad} bins; "
                         "SpexLab needs at least 10")
    engine_frac = (pad - 10 + 0.5) / 10.0

    wmin, wmax, dw = wave
    fmin, nf = _spexlab.rank_fiber_range(int(specmin), int(nspec), int(bundlesize), rank, size)
    part = None
    error = None
    if nf > 0:
        try:
            part = _spexlab.extract(
                planes[0], planes[1], planes[2], psf_obj, wmin, wmax, dw, fmin, nf,
                int(bundlesize), int(nsubbundles), int(nwavestep), engine_frac, float(pixpad_frac),
                float(regularize), float("nan") if psferr is None else float(psferr),
                bool(model), _engine_kind(gpu), list(gpus or []), int(threads))
        except Exception as e:
            error = e
    time_extracted = time.time()

    if comm is not None:
        errors = comm.allgather(None if error is None else f"rank {rank}: {error}")
        if error is not None:
            raise error
        bad = [e for e in errors if e is not None]
        if bad:
            raise SpexError("extraction failed on another rank: " + "; ".join(bad))
        parts = comm.gather(part, root=0)
    else:
        if error is not None:
            raise error
        parts = [part]
    time_staged = time.time()
    if rank != 0:
        return None

    parts = [p for p in parts if p is not None]
    stack = lambda key: np.concatenate([p[key] for p in parts], axis=0) if len(parts) > 1 \
        else parts[0][key]
    specflux = stack("specflux")
    specivar = stack("specivar")
    frame = dict(
        specflux=specflux,
        specivar=specivar,
        specmask=(specivar == 0).astype(np.int64),
        wave=np.arange(wmin, wmax + 0.5 * dw, dw),
        Rdiags=stack("Rdiags"),
        pixmask_fraction=stack("pixmask_fraction"),
        chi2pix=stack("chi2pix"),
        modelimage=None,
        mask=stack("mask"),
        engine=parts[0]["engine"],
    )
    if model:
        frame["modelimage"] = parts[0]["modelimage"]
        for p in parts[1:]:
            frame["modelimage"] = frame["modelimage"] + p["modelimage"]
    time_done = time.time()
    if isinstance(timing, dict):
        timing["init-mpi-comm"] = time_start
        timing["init-mpi-bcast"] = time_bcast
        timing["host-to-device"] = time_bcast
        timing["extracted-bundles"] = time_extracted
        timing["staged-bundles"] = time_staged
        timing["merged-bundles"] = time_done
        timing["assembled-frame"] = time_done
        timing["spexlab-read-inputs"] = time_init
    return frame
