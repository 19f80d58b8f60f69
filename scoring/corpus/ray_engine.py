"""The Ray engine: Ray Data `map_batches` over a pool of `ShardScorer` actors.

Each dataset row is one work shard (one batch of manifest rows), so a batch is scored whole
by one actor and every engine scores exactly the same batches. Actors take one GPU each when
the plan's device is CUDA, else one CPU. The CIDEr-D document frequencies are put in the
object store once and shared by every actor. Results stream back to the driver, which
writes them (`scoring.corpus.run.ResultWriter`).
"""
from __future__ import annotations

import logging
import socket
from typing import Iterator

import pandas as pd

from scoring.corpus.run import CorpusPlan, ShardScorer


class _RayShardScorer(ShardScorer):
    """ShardScorer whose document frequencies arrive as an object-store reference."""

    def __init__(self, cider_document_frequency_ref=None, **arguments):
        import ray

        frequencies = ray.get(cider_document_frequency_ref) if cider_document_frequency_ref is not None else None
        super().__init__(**arguments, cider_document_frequency=frequencies)


def _send_local_token(address: str | None) -> None:
    """Send this machine's Ray token to a cluster named by its address.

    Since Ray 2.60, `ray start --head` turns token authentication on and saves the token in
    ~/.ray/auth_token, but `ray.init` sends it only to a cluster it finds itself (`auto`), so
    joining `HOST:PORT` failed with "Authentication token is missing or incorrect" after 20 s
    of retries. A cluster without authentication ignores the token; an explicit
    RAY_AUTH_MODE is left as the user set it.
    """
    if not address or address == "auto":
        return
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:  # a Ray without token authentication
        return
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def _check_reachable(address: str | None, timeout_s: float = 5.0) -> None:
    """Fail in seconds when nothing listens at a HOST:PORT address: `ray.init` would retry
    for minutes before saying so."""
    if not address or address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):  # an IPv6 address, [::1]:6379
        host = host[1:-1]
    if not host or not port.isdigit():
        raise ValueError(f"cannot join the Ray cluster at {address}: expected HOST:PORT, 'auto' or ray://HOST:PORT")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ValueError(f"cannot join the Ray cluster at {address}: nothing answers there ({exc.strerror or exc}); "
                         "is `ray start --head` running on that machine?") from exc


def _wants_gpu(device: str | None) -> bool:
    return bool(device) and device.startswith("cuda")


def ray_results(plan: CorpusPlan, *, address: str | None = None, actors: int | None = None,
                threads: int | None = None) -> Iterator[pd.DataFrame]:
    """Result records of every shard of `plan`, as the actors finish them.

    address: a running cluster (`ray start --head` prints it; `auto` finds a local one);
    None starts a local Ray for this run. actors: pool size (default: one per GPU of the
    cluster for a CUDA device, else one per CPU).
    """
    import ray

    if not plan.shards:
        return
    started_here = not ray.is_initialized()
    if started_here:
        _check_reachable(address)
        _send_local_token(address)
        try:
            ray.init(address=address, include_dashboard=False, logging_level="WARNING", log_to_driver=False,
                     configure_logging=True)
        except (ConnectionError, RuntimeError) as exc:
            raise ValueError(f"cannot join the Ray cluster at {address}: {str(exc).splitlines()[0][:300]}") from exc
    try:
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False  # the corpus bar counts rows
        logging.getLogger("ray.data").setLevel(logging.ERROR)  # nor its "progress bars disabled" notes
        context.print_on_execution_start = False
        gpu = _wants_gpu(plan.device)
        resources = ray.cluster_resources()
        if gpu and resources.get("GPU", 0) < 1:  # GPU actors would wait for one forever
            raise ValueError(f"device {plan.device!r} asked for, but the Ray cluster has no GPU")
        pool = actors or max(1, int(resources.get("GPU" if gpu else "CPU", 1)))
        arguments = plan.scorer_arguments(threads or (None if gpu else 1))
        frequencies = arguments.pop("cider_document_frequency")
        dataset = ray.data.from_items([{"shard": str(s)} for s in plan.shards], override_num_blocks=len(plan.shards))
        scored = dataset.map_batches(
            _RayShardScorer, batch_size=1, batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=pool),
            num_gpus=1 if gpu else 0, num_cpus=0 if gpu else 1,
            fn_constructor_kwargs={**arguments,
                                   "cider_document_frequency_ref": None if frequencies is None else ray.put(frequencies)},
        )
        try:
            yield from scored.iter_batches(batch_size=None, batch_format="pandas")
        except ray.exceptions.RayError as exc:
            cause = getattr(exc, "cause", None) or exc
            lines = [line for line in str(cause).strip().splitlines() if line.strip()] or [type(cause).__name__]
            raise ValueError(f"a Ray worker failed: {lines[-1][:300]}") from exc
    finally:
        if started_here:
            ray.shutdown()
