"""`gpualign worker`: a Dask worker for `--scheduler` runs whose engines are ready before it joins."""

from __future__ import annotations

import click

from .common import DEBUG, THREADS, notice_printer, run_guarded, stderr_console

EPILOG = ("Examples (a scheduler, a worker on each GPU host, then runs from any host that reaches the "
          "scheduler):\n\n"
          "  dask scheduler --port 8786\n\n"
          "  gpualign worker --scheduler tcp://sched:8786\n\n"
          "  gpualign pairs a.fa b.fa --scheduler tcp://sched:8786 -o out.paf\n\n"
          "The worker forks its CPU engines, starts CUDA and loads and warms the edit and affine engine chains on "
          "each of its GPUs first, then joins; it serves runs until the scheduler closes or it is stopped "
          "(Ctrl-C, SIGTERM). One worker drives all the GPUs it is given, batches dealt to them as they free up.")


@click.option("--scheduler", required=True, help="The Dask scheduler to join (tcp://host:8786).")
@click.option("--gpus", help="This host's GPUs to drive: N (the first N), 'all' or device numbers (0,2). "
                             "Default: all of them, none without a GPU or with --device cpu.")
@click.option("--device", default="auto", help="auto|cpu|gpu: cpu serves on the CPU engines only.")
@THREADS
@click.option("--name", help="The worker's name in the cluster (default: Dask's).")
@click.option("--quiet", "-q", is_flag=True, help="No notice on stderr.")
@DEBUG
def worker(scheduler, gpus, device, threads, name, quiet, debug) -> None:
    """Serve --scheduler runs as a Dask worker, engines warm before the first batch."""
    from ..cluster import ClusterSpec
    from ..config import cap_threads, usable_cores
    from ..errors import ConfigError, DeviceError

    def body():
        if device not in ("auto", "cpu", "gpu"):
            raise ConfigError(f"--device must be auto, cpu or gpu (got {device!r})")
        ClusterSpec(scheduler=scheduler).validate(device)  # the address
        if gpus is not None:
            ClusterSpec(gpus=gpus).validate(device)  # its value; not with --device cpu
        try:
            from ..cluster_worker import serve
        except ImportError:
            raise DeviceError("gpualign worker needs Dask's distributed: pip install distributed") from None
        chosen = gpus
        if chosen is None and device != "cpu":
            from ..engines import gpu_status

            ok, what = gpu_status()
            if ok:
                chosen = "all"
            elif device == "gpu":
                raise DeviceError(f"--device gpu: no usable GPU ({what})")
        n_threads = cap_threads(threads)[0] or usable_cores()  # (-t 0: every core)
        serve(scheduler, chosen, n_threads, name, notice_printer(stderr_console(), quiet) or (lambda text: None))

    run_guarded(body, debug)
